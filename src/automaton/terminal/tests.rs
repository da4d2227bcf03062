//! Unit tests of the terminal automata: each builder against the regex it stands for.

use super::*;

use super::test_terminal as terminal;

fn accepts(t: &Terminal, bytes: &[u8]) -> bool {
    t.is_match(bytes.iter().fold(t.start(), |q, &b| t.next(q, b)))
}

/// Every string over `alphabet` up to `len` bytes.
fn strings_up_to(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> = vec![Vec::new()];
    let mut last = all.clone();
    for _ in 0..len {
        last = last
            .iter()
            .flat_map(|s| {
                alphabet.iter().map(move |&b| {
                    let mut longer = s.clone();
                    longer.push(b);
                    longer
                })
            })
            .collect();
        all.extend(last.iter().cloned());
    }
    all
}

fn counted(leaf: &str, min: u32, max: u32, suffix: &str) -> Result<Terminal, TerminalError> {
    Terminal::counted(String::new(), &terminal(leaf), min, max, &terminal(suffix))
}

#[test]
fn counted_repetitions_are_the_unrolled_regex() {
    // Same verdicts and liveness as the regex on every string of up to 7
    // bytes; escapes and multi-byte leaves, an empty suffix, min = max.
    for (leaf, min, max, suffix, alphabet) in [
        ("[a-c]|\\\\[nu]", 0, 8, "\"", &b"ab\\nu\"x"[..]),
        ("[a-c]|\\\\[nu]", 2, 9, "\",?", &b"a\\u\","[..]),
        ("ab|c", 1, 8, "", &b"abcx"[..]),
        ("x", 8, 8, "y+", &b"xy"[..]),
    ] {
        let whole = terminal(&format!("(?:{leaf}){{{min},{max}}}{suffix}"));
        let built = counted(leaf, min, max, suffix).unwrap();
        assert_eq!(whole.is_loopable(), built.is_loopable(), "{leaf}");
        for s in strings_up_to(alphabet, 7) {
            let end = |t: &Terminal| s.iter().fold(t.start(), |q, &b| t.next(q, b));
            let (a, b) = (end(&whole), end(&built));
            assert_eq!(
                a == DEAD,
                b == DEAD,
                "{leaf}{{{min},{max}}}{suffix} alive after {s:?}"
            );
            assert_eq!(whole.is_match(a), built.is_match(b), "{leaf} matches {s:?}");
        }
    }
    // An iteration and the suffix may not start alike; the leaf must loop.
    assert!(counted("a", 0, 8, "a").is_err());
    assert!(counted("a+", 0, 8, "b").is_err());
}

/// From `q` and from `canonical`, every text dies and matches at the same bytes.
fn assert_read_alike(t: &Terminal, q: State, canonical: State, texts: &[Vec<u8>]) {
    for text in texts {
        let run = |mut q: State| {
            text.iter()
                .map(|&b| {
                    q = t.next(q, b);
                    (q == DEAD, t.is_match(q))
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            run(q),
            run(canonical),
            "from {q} vs {canonical} on {text:?}"
        );
    }
}

#[test]
fn counts_far_from_the_bounds_share_a_table_state() {
    // From a state and from its table state, every text of at most `horizon`
    // bytes is alive and matches alike; the count goes from 0 to max.
    let t = counted("[a-c]|\\\\n", 5, 20, "\"").unwrap();
    let horizon = 4;
    let texts = strings_up_to(b"ab\\n\"", horizon as usize);
    let mut states = vec![t.start()];
    let mut shared = 0;
    for _ in 0..22 {
        let q = *states.last().unwrap();
        let canonical = t.table_state(q, horizon);
        shared += usize::from(canonical != q);
        assert_read_alike(&t, q, canonical, &texts);
        states.push(t.next(q, b'a'));
    }
    assert!(shared >= 10, "{shared} states shared a table");
    // Inside an escape too.
    let escape = b"aaaaaa\\".iter().fold(t.start(), |q, &b| t.next(q, b));
    assert_ne!(t.table_state(escape, horizon), escape);
}

/// `prefix (?:leaf){min,max} suffix`.
type CountedRegex<'a> = (&'a str, &'a str, u32, u32, &'a str);

/// A counted product and the plain product of the same regexes (the count
/// unrolled): `(prefix, leaf, min, max, suffix)`, the other regexes, the negated
/// ones.
fn products(
    (prefix, leaf, min, max, suffix): CountedRegex,
    parts: &[&str],
    negated: &[&str],
) -> (Terminal, Terminal) {
    let automata = |patterns: &[&str]| -> Vec<Arc<Terminal>> {
        patterns.iter().map(|p| Arc::new(terminal(p))).collect()
    };
    let mut counted = counted(leaf, min, max, suffix).unwrap();
    if !prefix.is_empty() {
        counted = Terminal::with_literal_prefix(
            String::new(),
            String::new(),
            prefix.as_bytes(),
            &counted,
        );
    }
    let unrolled = format!("{prefix}(?:{leaf}){{{min},{max}}}{suffix}");
    let mut plain_parts = automata(&[unrolled.as_str()]);
    plain_parts.extend(automata(parts));
    let limits = LexerLimits::default();
    let plain =
        Terminal::intersection(String::new(), &plain_parts, &automata(negated), &limits).unwrap();
    let product = Terminal::counted_product(
        String::new(),
        &counted,
        &automata(parts),
        &automata(negated),
        &limits,
    )
    .unwrap();
    (plain, product)
}

#[test]
fn counted_products_are_the_plain_intersection() {
    // Same liveness and matches on every string up to 9 bytes: parity a count
    // cannot reach (`(ab)*` under an odd bound), a minimum, finite and empty
    // languages, excluded strings across iterations, quotes, escapes and
    // multi-byte characters.
    type Case<'a> = (CountedRegex<'a>, &'a [&'a str], &'a [&'a str], &'a [u8]);
    let cases: [Case; 8] = [
        (("", "[ab]", 0, 5, ""), &["(?:ab)*"], &[], b"abx"),
        (
            ("", "[ab]", 3, 8, ""),
            &["a*b*a*"],
            &["(?s:.)*bb(?s:.)*"],
            b"ab",
        ),
        (("", "[abc]", 3, 8, ""), &["abc|ab"], &[], b"abc"),
        (("", "[ab]", 3, 8, ""), &["a{0,2}"], &[], b"ab"),
        (
            ("", "[a-c]|é", 0, 8, ""),
            &[],
            &["(?s:.)*ab(?s:.)*"],
            b"ab\xC3\xA9",
        ),
        (
            ("\"", "[a-c]|\\\\n", 2, 9, "\""),
            &["\"(?:a|b|\\\\n)*c\""],
            &[],
            b"abc\\n\"",
        ),
        (
            ("\"", "[a-c]", 0, 8, "\""),
            &["\"[a-c]*\""],
            &["\"(?s:.)*ca(?s:.)*\""],
            b"abc\"",
        ),
        (("", "[ab]", 8, 8, ""), &["(?:aab)*(?:ab)?"], &[], b"ab"),
    ];
    for (counted, parts, negated, alphabet) in cases {
        let (plain, product) = products(counted, parts, negated);
        assert!(product.counter_span().is_some_and(|k| k.carried));
        for s in strings_up_to(alphabet, 9) {
            let end = |t: &Terminal| s.iter().fold(t.start(), |q, &b| t.next(q, b));
            let (a, b) = (end(&plain), end(&product));
            assert_eq!(
                a == DEAD,
                b == DEAD,
                "{counted:?} {parts:?} alive after {s:?}"
            );
            assert_eq!(
                plain.is_match(a),
                product.is_match(b),
                "{counted:?} {parts:?} matches {s:?}"
            );
        }
    }
}

#[test]
fn counted_products_share_table_states_far_from_the_bounds() {
    // From a state and from its table state, every text of at most `horizon`
    // bytes is alive and matches alike (the `slack` keeps a pattern that needs
    // a few more characters apart from the bound).
    let (_, t) = products(
        ("\"", "[a-c]", 1, 40, "\""),
        &["\"(?:[ab]*c[ab]*c)+\""],
        &[],
    );
    let horizon = 3;
    let texts = strings_up_to(b"abc\"", horizon as usize);
    let mut q = t.next(t.start(), b'"');
    let mut shared = 0;
    for _ in 0..40 {
        let canonical = t.table_state(q, horizon);
        shared += usize::from(canonical != q);
        assert_read_alike(&t, q, canonical, &texts);
        q = t.next(q, b'c');
    }
    assert!(shared >= 20, "{shared} states shared a table");
}

#[test]
fn fingerprints_name_the_tables_whatever_built_them() {
    // Two builds, one fingerprint; another automaton, another. (The same
    // language with other byte classes, `ab|ac` and `a[bc]`, may get another:
    // less sharing, never a wrong one.)
    assert_eq!(
        terminal("ab|ac").fingerprint(),
        terminal("ab|ac").fingerprint()
    );
    assert_ne!(
        terminal("ab|ac").fingerprint(),
        terminal("ab|ad").fingerprint()
    );
    let rest = terminal("[0-9]+");
    let chained = |literal: &[u8]| {
        Terminal::with_literal_prefix(String::new(), String::new(), literal, &rest).fingerprint()
    };
    assert_eq!(chained(b"a:"), chained(b"a:"));
    assert_ne!(chained(b"a:"), chained(b"b:"));
    assert_ne!(chained(b"a:"), rest.fingerprint());
    let base = Arc::new(terminal("\"[a-z]*\""));
    let excluding = |names: &[&str]| {
        let names: Vec<Vec<u8>> = names.iter().map(|n| n.as_bytes().to_vec()).collect();
        Terminal::excluding(String::new(), &base, &names, &LexerLimits::default())
            .unwrap()
            .fingerprint()
    };
    assert_ne!(excluding(&["\"a\""]), excluding(&["\"b\""]));
    assert_eq!(excluding(&["\"a\""]), excluding(&["\"a\"", "\"a\""]));
}

#[test]
fn excluded_views_hand_out_the_rests_of_the_names() {
    let base = Arc::new(terminal("\"[a-z]*\""));
    let names: Vec<Vec<u8>> = ["\"ab\"", "\"ac\"", "\"b\""]
        .iter()
        .map(|n| n.as_bytes().to_vec())
        .collect();
    let t = Terminal::excluding(String::new(), &base, &names, &LexerLimits::default()).unwrap();
    let view = t
        .excluded_view()
        .expect("a JSON-like string ends after each name");
    let rests_after = |text: &[u8]| {
        let state = text.iter().fold(t.start(), |q, &b| t.next(q, b));
        let (base_state, rests) = view.at(state).expect("a live state");
        let base_expected = text.iter().fold(base.start(), |q, &b| base.next(q, b));
        assert_eq!(base_state, base_expected, "after {text:?}");
        let mut all = Vec::new();
        rests.for_each(|rest| all.push(String::from_utf8(rest.to_vec()).unwrap()));
        all.sort();
        all
    };
    assert_eq!(rests_after(b"\""), ["ab\"", "ac\"", "b\""]);
    assert_eq!(rests_after(b"\"a"), ["b\"", "c\""]);
    assert_eq!(rests_after(b"\"ab"), ["\""]);
    assert_eq!(rests_after(b"\"c"), Vec::<String>::new());
}

/// And [`Terminal::only_live_byte`], looked up per row, agrees (the
/// chain's literal states, the counter's computed ones, the plain ones).
#[test]
fn live_bytes_are_the_bytes_a_state_survives() {
    let counted = Terminal::counted(
        String::new(),
        &terminal("(?:[a-z]|\\\\u[0-9]{4}|é)"),
        2,
        6,
        &terminal("\",?"),
    )
    .unwrap();
    let chained = Terminal::with_literal_prefix(String::new(), String::new(), b",\"k\":", &counted);
    for t in [terminal("[0-9]+(?:\\.[0-9]*)?|null"), counted, chained] {
        for state in 0..t.state_count() as State {
            let live = t.live_bytes(state);
            for b in 0..=255u8 {
                assert_eq!(
                    live.contains(b),
                    t.next(state, b) != DEAD,
                    "{} state {state} byte {b}",
                    t.pattern
                );
            }
            let ascii = (0..0x7Fu8).filter(|&b| t.next(state, b) != DEAD).count();
            assert_eq!(t.live_ascii_count(state) as usize, ascii, "{}", t.pattern);
            let mut survived = (0..=255u8).filter(|&b| t.next(state, b) != DEAD);
            let only = match (survived.next(), survived.next()) {
                (Some(b), None) => Some(b),
                _ => None,
            };
            assert_eq!(t.only_live_byte(state), only, "{} state {state}", t.pattern);
        }
    }
}

#[test]
fn regex_fingerprints_tell_every_part_of_the_tree_apart() {
    let parse = test_hir;
    // Each differs from the others in one node: literal bytes, class ranges,
    // Unicode vs byte classes, counts, greediness, look-arounds, nesting.
    let patterns = [
        "ab",
        "ac",
        "[a-c]",
        "[a-d]",
        "(?-u:[a-c])",
        "a{2,3}",
        "a{2,4}",
        "a{2,}",
        "a{2,3}?",
        "^a",
        "a$",
        "(?:ab)|c",
        "a(?:b|c)",
        "(a)",
        "(?P<n>a)",
        "",
        "a*",
        "\\xFF",
        "(?-u:\\xFF)",
    ];
    let fingerprints: Vec<u128> = patterns
        .iter()
        .map(|p| hir_fingerprint(&parse(p)))
        .collect();
    for (i, a) in fingerprints.iter().enumerate() {
        assert_eq!(*a, hir_fingerprint(&parse(patterns[i])), "{}", patterns[i]);
        for (j, b) in fingerprints.iter().enumerate().skip(i + 1) {
            assert_ne!(a, b, "{} and {}", patterns[i], patterns[j]);
        }
    }
    // A concatenation's rest, fingerprinted without building it, is the rest's
    // fingerprint built (what lets `,"a":` and `,"b":` share one rest).
    for pattern in [",\"a\":[0-9]+", ",\"a\":[0-9]+x*", "ab[0-9]"] {
        let regex_syntax::hir::HirKind::Concat(items) = parse(pattern).into_kind() else {
            panic!("{pattern} is a concatenation");
        };
        for from in 1..=items.len() {
            let rest = &items[from..];
            assert_eq!(
                concat_fingerprint(rest),
                hir_fingerprint(&Hir::concat(rest.to_vec())),
                "{pattern} from item {from}"
            );
        }
    }
}

#[test]
fn literal_prefix_chained_onto_a_suffix_is_the_whole_terminal() {
    // Every string over the bytes that matter, up to 5 bytes: same verdicts, same
    // liveness, and the loopable flag carried over.
    for (literal, rest) in [
        (":", r"-?(?:0|[1-9][0-9]{0,5})(?:\.0+)?"),
        (",\"", r#"a":[0-9]"#),
        ("ab", "(?:ab)*c"),
        ("x", "x*"),
        ("\"", r#"[^"]*""#),
        // A literal alone: chained onto the empty string.
        (",\"a-1\":", ""),
    ] {
        let whole = terminal(&format!("{}{rest}", regex_syntax::escape(literal)));
        let chained = Terminal::with_literal_prefix(
            String::new(),
            String::new(),
            literal.as_bytes(),
            &terminal(rest),
        );
        assert_eq!(
            whole.is_loopable(),
            chained.is_loopable(),
            "{literal}{rest}"
        );
        let alphabet = b",\":a-0159.cxb";
        let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..5 {
            let longer: Vec<Vec<u8>> = strings
                .iter()
                .filter(|s| s.len() == strings.last().unwrap().len())
                .flat_map(|s| alphabet.iter().map(move |&b| [s.as_slice(), &[b]].concat()))
                .collect();
            strings.extend(longer);
        }
        for s in &strings {
            let q1 = s.iter().fold(whole.start(), |q, &b| whole.next(q, b));
            let q2 = s.iter().fold(chained.start(), |q, &b| chained.next(q, b));
            assert_eq!(
                whole.is_dead(q1),
                chained.is_dead(q2),
                "{literal}{rest} on {s:?}"
            );
            assert_eq!(
                whole.is_match(q1),
                chained.is_match(q2),
                "{literal}{rest} on {s:?}"
            );
        }
    }
}

#[test]
fn minimal_automata_merge_equivalent_states() {
    // One state for "inside the body" whether or not a character or an escape
    // was just read, so it loops on every character.
    let ascii = terminal(r#"(?:[ !#-\[\]-~]|\\["\\n])*"#);
    assert_eq!(ascii.state_count(), 3); // DEAD, body, after a backslash
                                        // `a*` after `x` or after `y`: the two branches share their future.
    let t = terminal("(?:xa*b|ya*b)");
    assert_eq!(t.state_count(), 4);
    for (text, ok) in [
        (&b"xaab"[..], true),
        (b"yb", true),
        (b"xa", false),
        (b"ab", false),
    ] {
        assert_eq!(accepts(&t, text), ok, "{:?}", String::from_utf8_lossy(text));
    }
    assert!(t.is_dead(t.next(t.start(), b'z')));
}

/// [`FreeText`]'s definition, directly: no exclude inside before the end; with
/// stops, the first position where one completes is the end.
fn free_text_accepts(text: &crate::grammar::FreeText, s: &[u8]) -> bool {
    if std::str::from_utf8(s).is_err() {
        return false;
    }
    let ends_at = |i: usize, pats: &[Vec<u8>]| {
        pats.iter()
            .any(|p| !p.is_empty() && i >= p.len() && s[i - p.len()..i] == p[..])
    };
    for i in 1..=s.len() {
        if ends_at(i, &text.stops) {
            return i == s.len();
        }
        if ends_at(i, &text.excludes) {
            return false;
        }
    }
    text.stops.is_empty()
}

#[test]
fn free_text_is_its_definition() {
    use crate::grammar::FreeText;
    let base = terminal(&super::any_utf8().to_string());
    let b = |items: &[&str]| {
        items
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    for text in [
        // A stop that overlaps itself: the first completion ends the text.
        FreeText {
            excludes: b(&[]),
            stops: b(&["aa"]),
        },
        FreeText {
            excludes: b(&["ba"]),
            stops: b(&["aab", "c"]),
        },
        // A stop and an exclude completing at the same byte: the stop wins.
        FreeText {
            excludes: b(&["bc"]),
            stops: b(&["c"]),
        },
        FreeText::excluding(b(&["ab", "b\u{e9}"])),
        FreeText::excluding(b(&[])),
    ] {
        let t = Terminal::free_text(String::new(), &base, &text, &LexerLimits::default()).unwrap();
        for s in strings_up_to(b"abc\xc3\xa9\xff", 6) {
            assert_eq!(
                accepts(&t, &s),
                free_text_accepts(&text, &s),
                "{} on {:?}",
                text.describe(),
                String::from_utf8_lossy(&s)
            );
        }
    }
}
