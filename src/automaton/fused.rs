//! A regular part of a grammar as one regex ([`Fused`]), and what lowering asks
//! of a regex before it fuses more into it: its weight (how large its automaton
//! may grow), whether it is a literal, the counted repetition marked in it
//! (built as a computed counter, never unrolled), its ambiguous runs of
//! counts (which make every DFA state pay for the splits between them), and its
//! searches (a loop over almost any byte that may hand over to what follows
//! anywhere: a DFA state then tracks every place the rest may have begun).
//!
//! Apart from [`super::lower`] so the lowering reads as the walk over rules and
//! this as the arithmetic over one regex it consults at every fusion.

use regex_syntax::hir::{Capture, Class, Hir, HirKind, Repetition};

use crate::bits::ByteSet;

/// Names the capture group that marks a counted repetition inside a fused regex
/// while lowering (never seen by a regex engine: `Lowering::terminal_symbols`
/// takes it out).
pub(super) const COUNTED_MARKER: &str = "stencil_counted";

/// A regular part of the grammar as one regex: its weight (see [`hir_weight`])
/// and whether it holds a counted repetition (marked, at its top level, after a
/// literal at most), with the weight of its plain regex for where a counter
/// cannot go (inside an alternation, after a non-literal).
#[derive(Clone)]
pub(super) struct Fused {
    pub(super) hir: Hir,
    pub(super) weight: usize,
    pub(super) plain_weight: usize,
    pub(super) counted: bool,
    pub(super) runs: Runs,
    pub(super) searches: Searches,
}

impl Fused {
    pub(super) fn regex(hir: Hir, weight: usize) -> Fused {
        Fused {
            runs: Runs::of(&hir),
            searches: Searches::of(&hir),
            hir,
            weight,
            plain_weight: weight,
            counted: false,
        }
    }

    /// The same language as a plain regex (no counter), with the same searches.
    pub(super) fn plain(self) -> Fused {
        if !self.counted {
            return self;
        }
        Fused {
            searches: self.searches,
            ..Fused::regex(unmarked(&self.hir), self.plain_weight)
        }
    }
}

/// Whether `hir` matches exactly one string (a literal, or the empty string).
pub(super) fn is_literal(hir: &Hir) -> bool {
    matches!(hir.kind(), HirKind::Literal(_) | HirKind::Empty)
}

/// The counted repetition marked in `hir`: `(prefix literal, repetition, suffix)`.
pub(super) fn counted_parts(hir: &Hir) -> Option<(Vec<u8>, &Repetition, Hir)> {
    let items = match hir.kind() {
        HirKind::Concat(items) => &items[..],
        _ => std::slice::from_ref(hir),
    };
    let at = items.iter().position(|item| {
        matches!(item.kind(), HirKind::Capture(c) if c.name.as_deref() == Some(COUNTED_MARKER))
    })?;
    let HirKind::Capture(capture) = items[at].kind() else {
        return None;
    };
    let HirKind::Repetition(repetition) = capture.sub.kind() else {
        return None;
    };
    let mut prefix = Vec::new();
    for item in &items[..at] {
        match item.kind() {
            HirKind::Literal(literal) => prefix.extend_from_slice(&literal.0),
            HirKind::Empty => {}
            _ => return None,
        }
    }
    Some((prefix, repetition, Hir::concat(items[at + 1..].to_vec())))
}

/// Whether `hir` holds a counted-repetition marker.
pub(super) fn has_marker(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Capture(c) => c.name.as_deref() == Some(COUNTED_MARKER) || has_marker(&c.sub),
        HirKind::Repetition(r) => has_marker(&r.sub),
        HirKind::Concat(items) | HirKind::Alternation(items) => items.iter().any(has_marker),
        _ => false,
    }
}

/// `hir` with every counted-repetition marker taken out (the plain regex).
pub(super) fn unmarked(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Capture(c) if c.name.as_deref() == Some(COUNTED_MARKER) => unmarked(&c.sub),
        HirKind::Capture(c) => Hir::capture(Capture {
            index: c.index,
            name: c.name.clone(),
            sub: Box::new(unmarked(&c.sub)),
        }),
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(unmarked(&r.sub)),
            ..r.clone()
        }),
        HirKind::Concat(items) => Hir::concat(items.iter().map(unmarked).collect()),
        HirKind::Alternation(items) => Hir::alternation(items.iter().map(unmarked).collect()),
        _ => hir.clone(),
    }
}

/// A rough size of the automaton a regex needs: repetitions multiply.
pub(super) fn hir_weight(hir: &Hir) -> usize {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 1,
        HirKind::Literal(lit) => lit.0.len(),
        HirKind::Class(regex_syntax::hir::Class::Unicode(c)) => 1 + c.ranges().len() * 2,
        HirKind::Class(regex_syntax::hir::Class::Bytes(c)) => 1 + c.ranges().len(),
        HirKind::Repetition(rep) => {
            hir_weight(&rep.sub).saturating_mul(repeat_factor(rep.min, rep.max))
        }
        HirKind::Capture(cap) => hir_weight(&cap.sub),
        HirKind::Concat(items) | HirKind::Alternation(items) => {
            items.iter().map(hir_weight).fold(1, usize::saturating_add)
        }
    }
}

/// Contains a repetition whose count varies by more than a few (`x{0,15}`). Under
/// an unbounded repetition that is the classic DFA blow-up (`([0-9]{0,15})*` tracks
/// every combination of counter positions), so such parts are not fused.
pub(super) fn has_variable_count(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Repetition(rep) => {
            rep.max.is_some_and(|max| max - rep.min > 4) || has_variable_count(&rep.sub)
        }
        HirKind::Capture(cap) => has_variable_count(&cap.sub),
        HirKind::Concat(items) | HirKind::Alternation(items) => {
            items.iter().any(has_variable_count)
        }
        _ => false,
    }
}

/// Ambiguous runs in a regex: two bounded repetitions of a varying count
/// (`x{0,20}`, as in [`has_variable_count`]) with nothing but what may be
/// empty between them, so that where one stops and the next starts is open
/// (see `MAX_FUSED_AMBIGUOUS_RUNS` in [`super::lower`]). Kept per fused part, with what a
/// concatenation needs to count the runs across its parts.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Runs {
    pub(super) count: usize,
    /// A varying repetition may come first (after parts that may be empty).
    pub(super) leads: bool,
    /// A varying repetition may come last (before parts that may be empty).
    pub(super) trails: bool,
    /// It matches the empty string.
    pub(super) nullable: bool,
}

impl Runs {
    pub(super) fn of(hir: &Hir) -> Runs {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => Runs {
                nullable: true,
                ..Runs::default()
            },
            HirKind::Literal(_) | HirKind::Class(_) => Runs::default(),
            HirKind::Capture(cap) => Runs::of(&cap.sub),
            HirKind::Repetition(rep) => {
                let sub = Runs::of(&rep.sub);
                let varies = rep.max.is_some_and(|max| max - rep.min > 4);
                Runs {
                    count: sub.count,
                    leads: varies,
                    trails: varies,
                    nullable: rep.min == 0 || sub.nullable,
                }
            }
            HirKind::Concat(items) => items.iter().map(Runs::of).fold(Runs::EMPTY, Runs::then),
            HirKind::Alternation(items) => {
                items.iter().map(Runs::of).fold(Runs::default(), Runs::or)
            }
        }
    }

    pub(super) const EMPTY: Runs = Runs {
        count: 0,
        leads: false,
        trails: false,
        nullable: true,
    };

    /// `self` followed by `next`.
    pub(super) fn then(self, next: Runs) -> Runs {
        Runs {
            count: self.count + next.count + usize::from(self.trails && next.leads),
            leads: self.leads || (self.nullable && next.leads),
            trails: next.trails || (next.nullable && self.trails),
            nullable: self.nullable && next.nullable,
        }
    }

    /// `self` or `other`.
    pub(super) fn or(self, other: Runs) -> Runs {
        Runs {
            count: self.count + other.count,
            leads: self.leads || other.leads,
            trails: self.trails || other.trails,
            nullable: self.nullable || other.nullable,
        }
    }
}

/// The searches of a fused part: places where a loop that reads anything
/// ([`is_wide`]: a comment-skipping `(\s|#[^\n]*)*`) may end and the next part
/// begin with one of the loop's bytes. The DFA of `W R` (`W` such a loop)
/// tracks, in every state, each place of `R` that some suffix read so far may
/// have reached; a second search inside `R` (a loop that reads anything never
/// closes) multiplies those sets. A Lark grammar that `%ignore`s `#` comments
/// weaves such a loop before every lexeme, and its statements fused into
/// terminals that passed 8 MB of DFA after 0.45 s of determinizing (after
/// which the whole grammar was lowered again, byte by byte). Counted between
/// the parts a lowering fuses (a regex leaf's own loops are its business);
/// the bound is `MAX_FUSED_SEARCHES` in [`super::lower`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Searches {
    pub(super) count: usize,
    /// Bytes a match may start with.
    lead: ByteSet,
    /// Every match that is not empty starts inside a wide loop: a search
    /// handing over to it goes on in that loop (`(.|\n)*` then `(.|\n)+`),
    /// tracking no more places.
    lead_loop: bool,
    /// Bytes a wide loop that may end a match goes on with (empty when no such
    /// loop can end it).
    trail: ByteSet,
    nullable: bool,
}

/// Whether a loop over `bytes` reads anything: every ASCII byte (a JSON
/// string's loop never reads its quote, nor a pattern's `.*` inside one).
fn is_wide(bytes: &ByteSet) -> bool {
    bytes
        .intersection(&ByteSet::from_ascii_class(u128::MAX))
        .len()
        == 128
}

impl Searches {
    /// A leaf: no search counted inside it.
    pub(super) fn of(hir: &Hir) -> Searches {
        let mut lead = ByteSet::EMPTY;
        let nullable = first_bytes(hir, &mut lead);
        let mut trail = ByteSet::EMPTY;
        trailing_loop_bytes(hir, &mut trail);
        if !is_wide(&trail) {
            trail = ByteSet::EMPTY;
        }
        Searches {
            count: 0,
            lead,
            lead_loop: starts_in_wide_loop(hir),
            trail,
            nullable,
        }
    }

    pub(super) const EMPTY: Searches = Searches {
        count: 0,
        lead: ByteSet::EMPTY,
        lead_loop: false,
        trail: ByteSet::EMPTY,
        nullable: true,
    };

    /// Nothing matched yet: the identity of [`Searches::or`].
    pub(super) const NONE: Searches = Searches {
        nullable: false,
        ..Searches::EMPTY
    };

    /// Whether a wide loop ending `self` hands over to `next`. Into another
    /// gap (a part that may be empty, ends in a wide loop and holds no
    /// search) the loop goes on in that gap's: counted at what follows it.
    fn meets(&self, next: &Searches) -> bool {
        let another_gap = next.nullable && next.count == 0 && !next.trail.is_empty();
        !another_gap && !next.lead_loop && !self.trail.intersection(&next.lead).is_empty()
    }

    /// Whether a loop that reads anything may end a match.
    pub(super) fn ends_in_wide_loop(&self) -> bool {
        !self.trail.is_empty()
    }

    /// `self` followed by `next`.
    pub(super) fn then(self, next: Searches) -> Searches {
        let mut lead = self.lead;
        if self.nullable {
            lead.union_with(&next.lead);
        }
        let mut trail = next.trail;
        if next.nullable {
            trail.union_with(&self.trail);
        }
        Searches {
            count: self.count + next.count + usize::from(self.meets(&next)),
            lead,
            lead_loop: self.lead_loop || (self.lead.is_empty() && next.lead_loop),
            trail,
            nullable: self.nullable && next.nullable,
        }
    }

    /// `self` or `other`: one of them is read, so their searches never nest.
    pub(super) fn or(self, other: Searches) -> Searches {
        let (mut lead, mut trail) = (self.lead, self.trail);
        lead.union_with(&other.lead);
        trail.union_with(&other.trail);
        Searches {
            count: self.count.max(other.count),
            lead,
            // A side that matches only the empty string starts nowhere.
            lead_loop: (self.lead_loop || self.lead.is_empty())
                && (other.lead_loop || other.lead.is_empty()),
            trail,
            nullable: self.nullable || other.nullable,
        }
    }

    /// How many searches `self{min,max}` holds (the rest of its [`Searches`]
    /// is its regex's, [`Searches::of`]). An unbounded loop's iterations share
    /// their automaton's places (a search in one iteration tracks the same
    /// places as in the next), so one iteration's count holds, with one more
    /// where an iteration's wide loop meets the next one's start; a bounded
    /// count is unrolled into copies, each with places of its own (a few
    /// copies show whether the count grows).
    pub(super) fn repeated_count(self, max: Option<u32>) -> usize {
        match max {
            Some(0 | 1) => self.count,
            Some(max) => {
                (1..max.min(4))
                    .fold(self, |copies, _| copies.then(self))
                    .count
            }
            None => self.count + usize::from(self.meets(&self)),
        }
    }
}

/// Whether every match of `hir` that is not empty starts inside an unbounded
/// loop that reads anything.
fn starts_in_wide_loop(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Repetition(repetition) => {
            let mut bytes = ByteSet::EMPTY;
            first_bytes(&repetition.sub, &mut bytes);
            (repetition.max.is_none() && is_wide(&bytes)) || starts_in_wide_loop(&repetition.sub)
        }
        HirKind::Capture(capture) => starts_in_wide_loop(&capture.sub),
        HirKind::Concat(items) => items
            .iter()
            .find(|item| item.properties().maximum_len() != Some(0))
            .is_some_and(starts_in_wide_loop),
        HirKind::Alternation(items) => items
            .iter()
            .filter(|item| item.properties().maximum_len() != Some(0))
            .all(starts_in_wide_loop),
        HirKind::Empty | HirKind::Look(_) | HirKind::Literal(_) | HirKind::Class(_) => false,
    }
}

/// Bytes with which an unbounded repetition that may end a match of `hir`
/// goes on: those of `[^\n]*` in `#[^\n]*`; none in `"[^"]*"`.
fn trailing_loop_bytes(hir: &Hir, out: &mut ByteSet) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Literal(_) | HirKind::Class(_) => {}
        HirKind::Repetition(repetition) => {
            if repetition.max.is_none() {
                first_bytes(&repetition.sub, out);
            }
            trailing_loop_bytes(&repetition.sub, out);
        }
        HirKind::Capture(capture) => trailing_loop_bytes(&capture.sub, out),
        HirKind::Concat(items) => {
            // From the end backwards, through the items that may be empty.
            for item in items.iter().rev() {
                trailing_loop_bytes(item, out);
                if item.properties().minimum_len() != Some(0) {
                    break;
                }
            }
        }
        HirKind::Alternation(items) => items.iter().for_each(|item| trailing_loop_bytes(item, out)),
    }
}

/// The weight of `sub{min,max}` unrolled: a copy of `sub` per iteration.
pub(super) fn repeat_weight(sub: usize, min: u32, max: Option<u32>) -> usize {
    sub.max(1).saturating_mul(repeat_factor(min, max))
}

/// How many copies of the repeated part a Thompson NFA holds.
pub(super) fn repeat_factor(min: u32, max: Option<u32>) -> usize {
    (max.unwrap_or(min.saturating_add(1)).max(1)) as usize
}

/// Matches nothing but the empty string.
pub(super) fn only_empty(hir: &Hir) -> bool {
    hir.properties().maximum_len() == Some(0)
}

/// Bytes that may start a match of `hir`: a superset of the first bytes of its
/// nonempty matches (a class's UTF-8 leading bytes are taken as a range, and a
/// concatenation that matches nothing still names its first item's bytes).
/// Disjoint sets prove two regexes start apart without building either
/// automaton. Returns whether `hir` may match the empty string.
pub(super) fn first_bytes(hir: &Hir, out: &mut ByteSet) -> bool {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(literal) => match literal.0.first() {
            Some(&b) => {
                out.insert(b);
                false
            }
            None => true,
        },
        HirKind::Class(Class::Bytes(class)) => {
            for range in class.ranges() {
                (range.start()..=range.end()).for_each(|b| out.insert(b));
            }
            false
        }
        HirKind::Class(Class::Unicode(class)) => {
            let lead = |c: char| c.encode_utf8(&mut [0; 4]).as_bytes()[0];
            for range in class.ranges() {
                (lead(range.start())..=lead(range.end())).for_each(|b| out.insert(b));
            }
            false
        }
        HirKind::Repetition(repetition) => first_bytes(&repetition.sub, out) || repetition.min == 0,
        HirKind::Capture(capture) => first_bytes(&capture.sub, out),
        HirKind::Concat(items) => items.iter().all(|item| first_bytes(item, out)),
        HirKind::Alternation(items) => items
            .iter()
            .fold(false, |empty, item| first_bytes(item, out) | empty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::terminal::{test_hir, test_terminal};

    /// Every byte that starts a match in the automaton is among `first_bytes`,
    /// and the sets are as small as the regexes say.
    #[test]
    fn first_bytes_hold_every_byte_a_match_starts_with() {
        for (pattern, expected, empty) in [
            (r#"[ \t]{0,20}"x"#, &b" \t\""[..], false),
            ("(?:a|)b*c", b"abc", false),
            ("(?:a|b?)", b"ab", true),
            ("(?u:é|[α-ω])x", b"\xc3\xce\xcf", false),
            (r"(?:(?-u:\b)q)?[0-9]", b"q0123456789", false),
            ("", b"", true),
        ] {
            let hir = test_hir(pattern);
            let mut first = ByteSet::EMPTY;
            assert_eq!(first_bytes(&hir, &mut first), empty, "{pattern}");
            let mut want = ByteSet::EMPTY;
            expected.iter().for_each(|&b| want.insert(b));
            assert_eq!(first.words(), want.words(), "{pattern}");
            let terminal = test_terminal(pattern);
            for b in 0..=255u8 {
                if !terminal.is_dead(terminal.next(terminal.start(), b)) {
                    assert!(first.contains(b), "{pattern}: {b:#x}");
                }
            }
        }
    }
    /// A loop that reads anything (a gap that skips comments) counts a search
    /// where a part that cannot be empty follows it; a JSON string's loop
    /// never does.
    #[test]
    fn searches_count_where_a_loop_that_reads_anything_hands_over() {
        let parse = test_hir;
        let gap = Searches::of(&parse(r"(?:[ \t\n]|#[^\n]*)*"));
        let word = Searches::of(&parse("[a-z]+"));
        assert_eq!(gap.then(word).count, 1);
        assert_eq!(gap.then(word).then(gap).then(word).count, 2);
        assert_eq!(gap.then(gap).count, 0, "counted at what follows the second");
        assert_eq!(gap.then(gap).then(word).count, 1);
        let body = Searches::of(&parse(r#"(?:[^"\\]|\\.)*"#));
        assert_eq!(
            body.then(word).count,
            0,
            "a string body never reads its quote"
        );
        let anything = Searches::of(&parse(r"(?s:.)+"));
        assert_eq!(gap.then(anything).count, 0, "one loop goes on in the other");
        assert_eq!(gap.then(word).or(word).count, 1, "alternatives never nest");
        let maybe_word = Searches::of(&parse("[a-z]*"));
        assert_eq!(
            gap.then(maybe_word).then(gap).then(word).count,
            2,
            "into what may be empty"
        );
        let inner = Searches::of(&parse("=")).then(gap).then(word);
        let mut optional = Searches::of(&parse(r"(?:=(?:[ \t\n]|#[^\n]*)*[a-z]+)?"));
        optional.count = inner.repeated_count(Some(1));
        assert_eq!(
            gap.then(optional).count,
            2,
            "into an optional part holding a search"
        );
        let starts_with_anything = Searches::of(&parse(r"(?s:.)*x"));
        assert_eq!(gap.then(starts_with_anything).count, 0);
        let may_start_elsewhere = Searches::of(&parse(r"a?(?s:.)*x"));
        assert_eq!(gap.then(may_start_elsewhere).count, 1);
        let unit = gap.then(word);
        assert_eq!(unit.repeated_count(None), 1, "iterations share places");
        assert_eq!(unit.repeated_count(Some(3)), 3, "copies do not");
    }
}
