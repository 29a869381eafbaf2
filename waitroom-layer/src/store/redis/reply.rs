//! Reply parsing: every reply from Redis is checked; anything unexpected is [`StoreError::Corrupt`].

use std::fmt;

use ::redis::Value;

use crate::error::StoreError;
use crate::store::{Inventory, Placement, SessionState, Settings};

pub(super) fn corrupt(what: impl fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("unexpected reply from Redis: {what}"))
}

pub(super) fn array(v: Value) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(corrupt(format_args!("expected an array, got {other:?}"))),
    }
}

pub(super) fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).map_err(corrupt),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Int(i) => Ok(i.to_string()),
        other => Err(corrupt(format_args!("expected a string, got {other:?}"))),
    }
}

pub(super) fn int(v: &Value) -> Result<u64, StoreError> {
    match v {
        Value::Int(i) => u64::try_from(*i).map_err(corrupt),
        Value::BulkString(_) | Value::SimpleString(_) => {
            let s = text(v)?;
            s.parse()
                .map_err(|_| corrupt(format_args!("expected a number, got `{s}`")))
        }
        other => Err(corrupt(format_args!("expected a number, got {other:?}"))),
    }
}

pub(super) fn opt_int(v: &Value) -> Result<Option<u64>, StoreError> {
    match v {
        Value::Nil => Ok(None),
        _ if text(v)?.is_empty() => Ok(None),
        _ => int(v).map(Some),
    }
}

pub(super) fn flag(v: &Value) -> Result<bool, StoreError> {
    Ok(int(v)? != 0)
}

pub(super) fn strings(v: Value) -> Result<Vec<String>, StoreError> {
    array(v)?.iter().map(text).collect()
}

pub(super) fn settings(v: &[Value]) -> Result<Settings, StoreError> {
    let [cap, apm, paused, closed, opens, random, inv] = v else {
        return Err(corrupt(format_args!(
            "expected 7 settings, got {}",
            v.len()
        )));
    };
    let inventory = match text(inv)? {
        s if s.is_empty() => None,
        s => {
            let mut parts = s.split(':').map(str::parse::<u64>);
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(Ok(total)), Some(Ok(sold)), Some(Ok(held)), None) => {
                    Some(Inventory { total, sold, held })
                }
                _ => return Err(corrupt(format_args!("inventory `{s}`"))),
            }
        }
    };
    Ok(Settings {
        capacity: int(cap)?,
        admit_per_minute: opt_int(apm)?,
        paused: flag(paused)?,
        closed: flag(closed)?,
        opens_at_ms: opt_int(opens)?,
        random_draw: flag(random)?,
        inventory,
    })
}

pub(super) fn placement(v: Value) -> Result<Option<Placement>, StoreError> {
    if v == Value::Nil {
        return Ok(None);
    }
    let a = array(v)?;
    let [sid, state, number] = a.as_slice() else {
        return Err(corrupt(format_args!(
            "expected a placement of 3, got {}",
            a.len()
        )));
    };
    let code = text(state)?;
    let state = match code.as_bytes() {
        [c] => SessionState::from_code(*c),
        _ => None,
    }
    .ok_or_else(|| corrupt(format_args!("session state `{code}`")))?;
    let number = int(number)?;
    Ok(Some(Placement {
        session: text(sid)?,
        state,
        number: (number > 0).then_some(number),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any reply Redis (or something posing as it) could send: nested arrays of every scalar kind.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Nil),
            Just(Value::Okay),
            any::<i64>().prop_map(Value::Int),
            proptest::collection::vec(any::<u8>(), 0..24).prop_map(Value::BulkString),
            "[a-zA-Z0-9:._-]{0,12}".prop_map(Value::SimpleString),
            any::<f64>().prop_map(Value::Double),
            any::<bool>().prop_map(Value::Boolean),
            // What the scripts really send, so the parsers get past their first check too.
            prop_oneof![
                Just("w"),
                Just("a"),
                Just("12"),
                Just("7:3:1"),
                Just(""),
                Just("1")
            ]
            .prop_map(|s| Value::BulkString(s.as_bytes().to_vec())),
        ];
        leaf.prop_recursive(3, 40, 8, |inner| {
            proptest::collection::vec(inner, 0..9).prop_map(Value::Array)
        })
    }

    fn typed<T>(r: Result<T, StoreError>) -> Result<(), TestCaseError> {
        match r {
            Ok(_) | Err(StoreError::Corrupt(_)) => Ok(()),
            Err(e) => Err(TestCaseError::fail(format!("not a typed refusal: {e}"))),
        }
    }

    proptest! {
        /// Arbitrary replies into every reader: no panic; a value or [`StoreError::Corrupt`].
        #[test]
        fn arbitrary_replies_are_read_or_refused_as_corrupt(v in value(), vs in proptest::collection::vec(value(), 0..9)) {
            typed(array(v.clone()))?;
            typed(text(&v))?;
            typed(int(&v))?;
            typed(opt_int(&v))?;
            typed(flag(&v))?;
            typed(strings(v.clone()))?;
            typed(placement(v.clone()))?;
            typed(settings(&vs))?;
            typed(placement(Value::Array(vs)))?;
        }
    }

    #[test]
    fn a_well_formed_placement_and_settings_read() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let p = placement(Value::Array(vec![b("sid"), b("w"), Value::Int(12)]))
            .unwrap()
            .unwrap();
        assert_eq!((p.state, p.number), (SessionState::Waiting, Some(12)));
        let s = settings(&[b("10"), b(""), b("0"), b("0"), b(""), b("1"), b("7:3:1")]).unwrap();
        assert_eq!(
            s.inventory,
            Some(Inventory {
                total: 7,
                sold: 3,
                held: 1
            })
        );
        assert!(matches!(int(&Value::Int(-1)), Err(StoreError::Corrupt(_))));
    }
}
