//! Every word of the default holding page, in one language: [`PageText`]. The layer keeps one set per language
//! ([`WaitingRoomLayerBuilder::page_text`](crate::WaitingRoomLayerBuilder::page_text)) and gives each request the
//! set its `Accept-Language` asks for; the page's script gets the same set (in the page's JSON island) and writes
//! the same words when it updates the page.

use std::sync::{Arc, LazyLock};

use http::HeaderMap;
use serde::Serialize;

/// The words of the holding page in one language. Each field is a sentence or a label; `{n}`, `{time}`,
/// `{minutes}`, `{a}`, `{b}`, `{h}` and `{countdown}` in a field are replaced as its documentation says. Plurals
/// come as a pair (`_one` for 1, `_many` for any other count), which covers the languages whose plural has two
/// forms (English, German, French, Spanish, Italian, Dutch, the Nordic languages...).
///
/// Ships in English ([`english`](Self::english), the default) and German ([`german`](Self::german)). Change a few
/// words, or register a language of your own:
///
/// ```
/// use waitroom_layer::PageText;
/// let mut en = PageText::english();
/// en.headline_waiting = "You are in the queue".into();
/// en.ahead_many = "{n} fans are ahead of you.".into();
/// assert_eq!(en.ahead(1_235), "1,234 fans are ahead of you.");
/// let de = PageText::german();
/// assert_eq!(de.ahead(2), "1 Person ist vor Ihnen.");
/// assert_eq!(de.eta_words(240, 360), "etwa 4 bis 6 Minuten");
/// // On the layer: `.page_text(en).page_text(de)`; a browser asking for `de-AT, de;q=0.9, en;q=0.5` reads German,
/// // any other English (the first set registered).
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageText {
    /// The language's tag (BCP 47: `en`, `de`, `fr-CA`): the page's `lang` and what `Accept-Language` is matched
    /// against (a request for `de-AT` takes a set tagged `de` when there is no `de-AT`, and the other way round).
    pub lang: String,
    /// Between groups of three digits: `,` in English ("48,000"), `.` in German ("48.000").
    pub thousands_separator: String,
    /// A time the server writes, in UTC (`{time}`: `10:00:00`, or the date too when it is not within the day); the
    /// page's script writes the reader's local time instead.
    pub utc_time: String,

    /// Headline: before the draw.
    pub headline_prequeue: String,
    /// Headline: in line.
    pub headline_waiting: String,
    /// Headline: in line, the door paused by an operator.
    pub headline_paused: String,
    /// Headline: in line, every seat left held at checkout.
    pub headline_seats_held: String,
    /// Headline: let in.
    pub headline_admitted: String,
    /// Headline: sold out.
    pub headline_sold_out: String,
    /// Headline: closed.
    pub headline_closed: String,
    /// Headline: not in line.
    pub headline_not_in_line: String,
    /// Headline: back within the return window.
    pub headline_returning: String,
    /// Headline: the turn passed while away.
    pub headline_missed: String,

    /// Before the draw (`{time}`: when it happens).
    pub prequeue: String,
    /// In line before the opening (`{time}`: when the door opens).
    pub not_open: String,
    /// Place 1.
    pub next_in_line: String,
    /// One person ahead.
    pub ahead_one: String,
    /// `{n}` people ahead.
    pub ahead_many: String,
    /// In line, place unknown.
    pub in_line: String,
    /// Added when the seats left are likely to run out before this person's turn.
    pub reach: String,
    /// The door paused by an operator.
    pub paused: String,
    /// Every seat left held at checkout.
    pub seats_held: String,
    /// Let in, on the way.
    pub admitted: String,
    /// Sold out.
    pub sold_out: String,
    /// Closed.
    pub closed: String,
    /// Not in line.
    pub not_in_line: String,
    /// Back within the return window.
    pub returning: String,
    /// The turn passed while away.
    pub missed: String,

    /// What to do while waiting (`{minutes}`: the idle timeout, from `minutes_one` / `minutes_many`).
    pub steps_wait: String,
    /// What to do when it is over (sold out, closed).
    pub steps_done: String,
    /// What to do after a missed turn.
    pub steps_missed: String,
    /// What to do when let in and nothing happens.
    pub steps_admitted: String,
    /// One minute.
    pub minutes_one: String,
    /// `{n}` minutes.
    pub minutes_many: String,
    /// The store cannot be reached (the server's page).
    pub store_note: String,
    /// The page cannot reach the room (the script's note).
    pub store_note_retrying: String,

    /// Label of the place.
    pub label_place: String,
    /// Label of the estimated wait.
    pub label_wait: String,
    /// Label of the opening time.
    pub label_opens: String,
    /// Label of the progress bar.
    pub label_progress: String,
    /// Before the time of the last update.
    pub label_updated: String,
    /// The countdown to the opening (`{countdown}`: `4:59`, `1:04:59`).
    pub countdown: String,
    /// The link on to the page asked for.
    pub link_continue: String,
    /// The link that joins the line again.
    pub link_join_again: String,

    /// A wait under a minute.
    pub eta_under_minute: String,
    /// A wait of about one minute.
    pub eta_one_minute: String,
    /// About `{b}` minutes.
    pub eta_minutes: String,
    /// About `{a}` to `{b}` minutes.
    pub eta_minutes_range: String,
    /// About `{a}` minutes to `{h}` hours.
    pub eta_minutes_to_hours: String,
    /// About `{h}` hours.
    pub eta_hours: String,
    /// About `{a}` to `{h}` hours.
    pub eta_hours_range: String,
}

fn s(v: &str) -> String {
    v.to_owned()
}

impl Default for PageText {
    fn default() -> Self {
        Self::english()
    }
}

impl PageText {
    /// The page in English (the default).
    pub fn english() -> Self {
        Self {
            lang: s("en"),
            thousands_separator: s(","),
            utc_time: s("{time} UTC"),
            headline_prequeue: s("You are in the pre-queue"),
            headline_waiting: s("You are in line"),
            headline_paused: s("You are in line; the line is paused"),
            headline_seats_held: s("You are in line; every seat is held right now"),
            headline_admitted: s("It is your turn"),
            headline_sold_out: s("Sold out"),
            headline_closed: s("This sale is closed"),
            headline_not_in_line: s("You are not in line yet"),
            headline_returning: s("Welcome back: your turn is kept"),
            headline_missed: s("Your turn passed while you were away"),
            prequeue: s(
                "The draw happens at {time}. Everyone who arrives before then gets a place in line by \
                         random draw; arriving earlier or later before then makes no difference.",
            ),
            not_open: s("The line opens at {time}; the wait below starts then."),
            next_in_line: s("You are next."),
            ahead_one: s("There is 1 person ahead of you."),
            ahead_many: s("There are {n} people ahead of you."),
            in_line: s("You have a place in line."),
            reach: s("The tickets left may run out before your turn."),
            paused: s(
                "Nobody is being let in at the moment: the line is paused. You keep your place, and the \
                       line moves again by itself.",
            ),
            seats_held: s(
                "Every seat left is held by people at checkout, so nobody is being let in. Some seats \
                           may come back if a hold lapses. You keep your place, and the line moves again by \
                           itself.",
            ),
            admitted: s("Taking you there now."),
            sold_out: s("Every ticket has been sold. Thank you for waiting."),
            closed: s("Nobody new is being let in."),
            not_in_line: s(
                "We could not put you in line just now; this page tries again by itself.",
            ),
            returning: s(
                "Your turn came while you were away, and we kept it: you go in at the next free place, \
                          ahead of the line.",
            ),
            missed: s(
                "Your turn came while this page was not open. We kept it for you for a while, but that \
                       time has passed, so your place in line is gone. You can join the line again, at the \
                       back.",
            ),
            steps_wait: s(
                "Keep this page open; there is no need to refresh. When it is your turn, it takes you \
                           on by itself. You then have {minutes} of inactivity before your place is given to the \
                           next person.",
            ),
            steps_done: s("You can close this page."),
            steps_missed: s("Follow the link below to join the line again."),
            steps_admitted: s("If nothing happens, follow the link below."),
            minutes_one: s("1 minute"),
            minutes_many: s("{n} minutes"),
            store_note: s(
                "Status temporarily unknown: we cannot reach the line right now, so these figures are \
                           the last known ones. You keep your place; this page keeps trying.",
            ),
            store_note_retrying: s("Status temporarily unknown: this page keeps trying."),
            label_place: s("Your place"),
            label_wait: s("Estimated wait"),
            label_opens: s("Opens at"),
            label_progress: s("Progress through the line since you joined"),
            label_updated: s("Last updated"),
            countdown: s("in {countdown}"),
            link_continue: s("Continue"),
            link_join_again: s("Join the line again"),
            eta_under_minute: s("less than a minute"),
            eta_one_minute: s("about a minute"),
            eta_minutes: s("about {b} minutes"),
            eta_minutes_range: s("about {a} to {b} minutes"),
            eta_minutes_to_hours: s("about {a} minutes to {h} hours"),
            eta_hours: s("about {h} hours"),
            eta_hours_range: s("about {a} to {h} hours"),
        }
    }

    /// The page in German (formal address).
    pub fn german() -> Self {
        Self {
            lang: s("de"),
            thousands_separator: s("."),
            utc_time: s("{time} UTC"),
            headline_prequeue: s("Sie sind in der Vorwarteschlange"),
            headline_waiting: s("Sie sind in der Warteschlange"),
            headline_paused: s("Sie sind in der Warteschlange; sie ist angehalten"),
            headline_seats_held: s(
                "Sie sind in der Warteschlange; alle Plätze sind gerade reserviert",
            ),
            headline_admitted: s("Sie sind an der Reihe"),
            headline_sold_out: s("Ausverkauft"),
            headline_closed: s("Der Verkauf ist beendet"),
            headline_not_in_line: s("Sie sind noch nicht in der Warteschlange"),
            headline_returning: s("Willkommen zurück: Ihr Platz ist reserviert"),
            headline_missed: s("Ihr Platz ist verfallen, während Sie weg waren"),
            prequeue: s(
                "Die Auslosung findet um {time} statt. Wer vorher kommt, erhält per Los einen Platz in \
                         der Warteschlange; ob Sie früher oder später vorher kommen, macht keinen Unterschied.",
            ),
            not_open: s("Die Warteschlange öffnet um {time}; die Wartezeit unten beginnt dann."),
            next_in_line: s("Sie sind als Nächstes an der Reihe."),
            ahead_one: s("1 Person ist vor Ihnen."),
            ahead_many: s("{n} Personen sind vor Ihnen."),
            in_line: s("Sie haben einen Platz in der Warteschlange."),
            reach: s(
                "Die restlichen Tickets könnten ausverkauft sein, bevor Sie an der Reihe sind.",
            ),
            paused: s(
                "Im Moment wird niemand eingelassen: Die Warteschlange ist angehalten. Sie behalten Ihren \
                       Platz, und es geht von selbst weiter.",
            ),
            seats_held: s(
                "Alle übrigen Plätze sind von Personen an der Kasse reserviert, daher wird niemand \
                           eingelassen. Einige Plätze können frei werden, wenn eine Reservierung abläuft. Sie \
                           behalten Ihren Platz, und es geht von selbst weiter.",
            ),
            admitted: s("Sie werden jetzt weitergeleitet."),
            sold_out: s("Alle Tickets sind verkauft. Danke fürs Warten."),
            closed: s("Es wird niemand mehr eingelassen."),
            not_in_line: s(
                "Wir konnten Sie gerade nicht in die Warteschlange aufnehmen; diese Seite versucht es \
                            von selbst erneut.",
            ),
            returning: s(
                "Sie waren an der Reihe, während Sie weg waren, und wir haben Ihren Platz behalten: Sie \
                          kommen beim nächsten freien Platz hinein, vor der Warteschlange.",
            ),
            missed: s(
                "Sie waren an der Reihe, während diese Seite nicht offen war. Wir haben Ihren Platz eine \
                       Weile behalten, aber diese Zeit ist vorbei. Sie können sich erneut anstellen, am Ende der \
                       Warteschlange.",
            ),
            steps_wait: s(
                "Lassen Sie diese Seite offen; Sie müssen nicht neu laden. Wenn Sie an der Reihe sind, \
                           leitet sie Sie von selbst weiter. Danach haben Sie {minutes} ohne Aktivität, bevor Ihr \
                           Platz an die nächste Person geht.",
            ),
            steps_done: s("Sie können diese Seite schließen."),
            steps_missed: s("Folgen Sie dem Link unten, um sich erneut anzustellen."),
            steps_admitted: s("Falls nichts passiert, folgen Sie dem Link unten."),
            minutes_one: s("1 Minute"),
            minutes_many: s("{n} Minuten"),
            store_note: s(
                "Status vorübergehend unbekannt: Wir erreichen die Warteschlange gerade nicht, die \
                           Angaben sind die zuletzt bekannten. Sie behalten Ihren Platz; diese Seite versucht es \
                           weiter.",
            ),
            store_note_retrying: s(
                "Status vorübergehend unbekannt: Diese Seite versucht es weiter.",
            ),
            label_place: s("Ihr Platz"),
            label_wait: s("Geschätzte Wartezeit"),
            label_opens: s("Öffnet um"),
            label_progress: s("Fortschritt in der Warteschlange, seit Sie da sind"),
            label_updated: s("Zuletzt aktualisiert"),
            countdown: s("in {countdown}"),
            link_continue: s("Weiter"),
            link_join_again: s("Erneut anstellen"),
            eta_under_minute: s("weniger als eine Minute"),
            eta_one_minute: s("etwa eine Minute"),
            eta_minutes: s("etwa {b} Minuten"),
            eta_minutes_range: s("etwa {a} bis {b} Minuten"),
            eta_minutes_to_hours: s("etwa {a} Minuten bis {h} Stunden"),
            eta_hours: s("etwa {h} Stunden"),
            eta_hours_range: s("etwa {a} bis {h} Stunden"),
        }
    }

    /// `n` with [`thousands_separator`](Self::thousands_separator) between groups of three digits.
    pub fn number(&self, n: u64) -> String {
        grouped_digits(n, &self.thousands_separator)
    }

    /// Who is ahead of place `position` (1 = next): [`next_in_line`](Self::next_in_line), or the singular or
    /// plural sentence with the count.
    pub fn ahead(&self, position: u64) -> String {
        match position.saturating_sub(1) {
            0 => self.next_in_line.clone(),
            1 => self.ahead_one.clone(),
            n => self.ahead_many.replace("{n}", &self.number(n)),
        }
    }

    /// A count of minutes, singular or plural.
    pub fn minutes(&self, n: u64) -> String {
        if n == 1 {
            self.minutes_one.clone()
        } else {
            self.minutes_many.replace("{n}", &self.number(n))
        }
    }

    /// A wait range in words: "about 4 to 6 minutes", "about 2 to 4 hours". The page's script words a wait the
    /// same way, from the same set.
    pub fn eta_words(&self, low: u64, high: u64) -> String {
        if high < 60 {
            return self.eta_under_minute.clone();
        }
        let a = low.div_ceil(60).max(1);
        let b = high.div_ceil(60);
        let fill = |t: &str, a: u64, b: u64, h: u64| {
            t.replace("{a}", &self.number(a))
                .replace("{b}", &self.number(b))
                .replace("{h}", &self.number(h))
        };
        if b >= 120 {
            let hours = b.div_ceil(60);
            return if a < 60 {
                fill(&self.eta_minutes_to_hours, a, b, hours)
            } else if a / 60 >= hours {
                fill(&self.eta_hours, a, b, hours)
            } else {
                fill(&self.eta_hours_range, a / 60, b, hours)
            };
        }
        if a >= b {
            if b == 1 {
                self.eta_one_minute.clone()
            } else {
                fill(&self.eta_minutes, a, b, 0)
            }
        } else {
            fill(&self.eta_minutes_range, a, b, 0)
        }
    }
}

/// The English set, for [`eta_words`](crate::eta_words).
pub(crate) static ENGLISH: LazyLock<PageText> = LazyLock::new(PageText::english);

/// The sets a layer serves, the first the fallback.
#[derive(Debug, Clone)]
pub(crate) struct PageTexts(Vec<Arc<PageText>>);

impl Default for PageTexts {
    fn default() -> Self {
        Self(vec![Arc::new(PageText::english())])
    }
}

impl PageTexts {
    /// Adds `text`, replacing a set of the same language (the English default included).
    pub(crate) fn add(&mut self, text: PageText) {
        match self
            .0
            .iter_mut()
            .find(|t| t.lang.eq_ignore_ascii_case(&text.lang))
        {
            Some(t) => *t = Arc::new(text),
            None => self.0.push(Arc::new(text)),
        }
    }

    /// The set for a request: the first language of its `Accept-Language` (by quality) that a set has, exactly or
    /// by its primary tag (`de-AT` and `de`); else the first set.
    pub(crate) fn pick(&self, headers: &HeaderMap) -> Arc<PageText> {
        let first = || self.0[0].clone();
        if self.0.len() == 1 {
            return first();
        }
        let Some(header) = headers
            .get(http::header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= 1024)
        else {
            return first();
        };
        let primary = |tag: &str| tag.split('-').next().unwrap_or("").to_ascii_lowercase();
        for asked in accept_language::parse(header).iter().take(16) {
            if let Some(t) = self.0.iter().find(|t| t.lang.eq_ignore_ascii_case(asked)) {
                return t.clone();
            }
            if let Some(t) = self.0.iter().find(|t| primary(&t.lang) == primary(asked)) {
                return t.clone();
            }
        }
        first()
    }
}

/// `n` with `separator` between groups of three digits, from the right: `grouped_digits(48_000, ",")` is
/// `"48,000"`. What [`PageText::number`] writes; also for an app's own pages in the same style.
pub fn grouped_digits(n: u64, separator: &str) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 * separator.len());
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push_str(separator);
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT_LANGUAGE, v.parse().unwrap());
        h
    }

    #[test]
    fn the_language_is_the_first_asked_for_that_is_registered() {
        let mut texts = PageTexts::default();
        assert_eq!(
            texts.pick(&asking("de")).lang,
            "en",
            "only English registered"
        );
        texts.add(PageText::german());
        assert_eq!(texts.pick(&asking("de-AT, de;q=0.9, en;q=0.5")).lang, "de");
        assert_eq!(texts.pick(&asking("fr, en;q=0.8, de;q=0.5")).lang, "en");
        assert_eq!(texts.pick(&asking("fr, de;q=0.8, en;q=0.5")).lang, "de");
        assert_eq!(texts.pick(&asking("en-GB;q=0.3, de;q=0.9")).lang, "de");
        assert_eq!(texts.pick(&asking("fr")).lang, "en", "the first set");
        assert_eq!(texts.pick(&HeaderMap::new()).lang, "en");
        assert_eq!(texts.pick(&asking(";;q=,,de-")).lang, "de");
        // A set of the same language replaces the one registered.
        let mut en = PageText::english();
        en.headline_waiting = "In the queue".into();
        texts.add(en);
        assert_eq!(texts.pick(&asking("en")).headline_waiting, "In the queue");
    }

    #[test]
    fn numbers_and_plurals() {
        let en = PageText::english();
        assert_eq!(en.number(0), "0");
        assert_eq!(en.number(999), "999");
        assert_eq!(en.number(48_000), "48,000");
        assert_eq!(en.number(1_234_567), "1,234,567");
        assert_eq!(en.ahead(1), "You are next.");
        assert_eq!(en.ahead(2), "There is 1 person ahead of you.");
        assert_eq!(en.ahead(3), "There are 2 people ahead of you.");
        assert_eq!(en.ahead(1_001), "There are 1,000 people ahead of you.");
        assert_eq!(en.minutes(1), "1 minute");
        assert_eq!(en.minutes(10), "10 minutes");
        let de = PageText::german();
        assert_eq!(de.number(48_000), "48.000");
        assert_eq!(de.ahead(3), "2 Personen sind vor Ihnen.");
        assert_eq!(de.eta_words(7200, 10800), "etwa 2 bis 3 Stunden");
    }
}
