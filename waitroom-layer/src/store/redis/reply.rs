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
    let [
        cap,
        apm,
        paused,
        closed,
        opens,
        random,
        inv,
        pqopens,
        closes,
    ] = v
    else {
        return Err(corrupt(format_args!(
            "expected 9 settings, got {}",
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
        prequeue_opens_at_ms: opt_int(pqopens)?,
        closes_at_ms: opt_int(closes)?,
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
