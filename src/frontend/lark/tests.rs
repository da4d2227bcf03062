//! The front-end's own cases: what each construct means, and where errors point.

use super::*;
use crate::automaton::{CompileOptions, CompiledGrammar};
use crate::matcher::Matcher;
use std::sync::Arc;

fn compiled(text: &str) -> Arc<CompiledGrammar> {
    let g = parse(text, &LarkOptions::default()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    Arc::new(CompiledGrammar::compile(&g, &CompileOptions::default()).unwrap())
}

fn accepts(g: &Arc<CompiledGrammar>, input: &str) -> bool {
    let mut m = Matcher::new(Arc::clone(g));
    m.consume_bytes(input.as_bytes()).is_ok() && m.is_accepting()
}

fn language(text: &str, accept: &[&str], reject: &[&str]) {
    let g = compiled(text);
    for s in accept {
        assert!(accepts(&g, s), "{text:?} should accept {s:?}");
    }
    for s in reject {
        assert!(!accepts(&g, s), "{text:?} should reject {s:?}");
    }
}

/// (line, column, message) of the error.
fn error(text: &str) -> (u32, u32, String) {
    match parse(text, &LarkOptions::default()) {
        Err(FrontendError::Syntax { location, message }) => {
            (location.line, location.column, message)
        }
        Err(FrontendError::Grammar(e)) if e.location().is_some() => {
            let location = e.location().expect("checked");
            (location.line, location.column, e.to_string())
        }
        other => panic!("{text:?}: expected a located error, got {other:?}"),
    }
}

#[test]
fn constructs() {
    language(
        "start: a b? c* d+ e{2} f{1,2}\na: \"a\"\nb: \"b\"\nc: \"c\"\nd: \"d\"\ne: \"e\"\nf: \"f\"",
        &["adeef", "abcccddeeff", "adeeff"],
        &["ad", "adee f", "abcd"],
    );
    language("start: \"ab\"i", &["ab", "AB", "aB"], &["abc"]);
    language("start: \"a\"..\"c\"+", &["abc", "cc"], &["d", ""]);
    language("start: /a+/i \"-\" /x y/x", &["aA-xy"], &["a-x y"]);
    language("start: [\"a\"] \"b\"", &["ab", "b"], &["a"]);
    language(
        "start: (\"a\" | \"b\")~2..3",
        &["ab", "bab"],
        &["a", "abab"],
    );
    language(
        "start: x\n    | y\n?x: \"x\" -> alias\n!y: \"y\"",
        &["x", "y"],
        &["xy"],
    );
    language("start: \"\\u00e9\\x41\\n\"", &["éA\n"], &["é"]);
    language(
        "// comment\nstart: A # comment\nA: B \"-\" B\nB: /[0-9]/",
        &["1-2"],
        &["1-", "12"],
    );
}

#[test]
fn ignore_goes_between_lexemes_only() {
    let g = "%import common.WS\n%ignore WS\nstart: \"a\" b\nb: \"b\" \"c\"";
    language(g, &["abc", "a b c", "a\nbc"], &[" abc", "abc ", "a b c x"]);
    let g = "%llguidance {\"allow_initial_skip\": true}\n%ignore \" \"\nstart: \"a\" \"b\"";
    language(g, &[" a b", "ab"], &["a-b", "a b "]);
    let g = "%llguidance {\"ignore_once\": true}\n%ignore /[ ]{1,2}/\nstart: \"a\" \"b\"";
    language(g, &["a  b", "ab"], &["a   b"]);
    // Terminals are one lexeme: no ignored text inside.
    let g = "%ignore \" \"\nstart: AB \"c\"\nAB: \"a\" \"b\"";
    language(g, &["ab c", "abc"], &["a bc"]);
    // The first lexeme may come late, after optional parts and inside rules.
    let g = "%ignore \" \"\nstart: x \"c\"\nx: \"a\"?";
    language(g, &["c", "a c", "ac"], &[" c", " a c", "c "]);
    let g = "%ignore \" \"\nstart: \"a\"? \"b\"? \"c\"? \"d\"? \"e\"? \"z\"";
    language(g, &["z", "a b z", "e z", "abcdez"], &[" z", " a z", "z "]);
    let g = "%ignore \" \"\nstart: (\"a\"?)* \"z\" | \"q\"{0,3}";
    language(g, &["z", "a a z", "", "q q"], &[" z", " ", " q"]);
    // Nested grammars: their own %ignore, not before the output's first lexeme.
    let g = "start: %lark {\n%ignore \" \"\nstart: \"a\" \"b\"\n} \"c\"";
    language(g, &["a bc", "abc"], &[" abc", "ab c"]);
    let g = "%ignore \" \"\nstart: \"x\" %lark {\nstart: \"a\" \"b\"\n} \"c\"";
    language(g, &["x abc", "xab c"], &["xa bc", " xabc"]);
}

#[test]
fn and_not_and_lazy() {
    language(
        "start: ST\nST: /[a-z]+/ & ~/(.*)x(.*)/",
        &["abc"],
        &["axb", "", "A"],
    );
    language(
        "start: \"<\" r \">\"\nr[lazy]: /[a-z]+/",
        &["<a>"],
        &["<ab>"],
    );
    language(
        "start: head \"!\"\nhead[suffix=\"<end>\"]: /(.|\\n)*/",
        &["ab<end>!", "<end>!"],
        &["a<end>b<end>!"],
    );
}

#[test]
fn nested_grammars_and_json() {
    language(
        "start: \"x\" %lark {\nstart: A\nA: \"a\"\n} A\nA: \"b\"",
        &["xab"],
        &["xaa", "xbb"],
    );
    language(
        "start: \"n=\" %json {\"type\": \"integer\", \"minimum\": 3}",
        &["n=3", "n=42"],
        &["n=2", "n=\"3\""],
    );
    language(
        "start: %regex {\"substring_words\": \"the quick fox\"}",
        &["", "quick fox", "the quick"],
        &["he", "fox quick"],
    );
}

#[test]
fn errors_name_line_and_column() {
    let cases: &[(&str, u32, u32, &str)] = &[
        ("start: foo", 1, 8, "unknown name: \"foo\""),
        (
            "start: A\nA: \"a\" B\nB: A",
            2,
            1,
            "circular reference in token \"A\"",
        ),
        ("start: \"a\"\nstart: \"b\"", 2, 1, "duplicate rule"),
        ("start: /[a/", 1, 9, "invalid regex"),
        ("start: \"abc", 1, 8, "unterminated string"),
        (
            "start: X\nX: <|eot_id|>",
            2,
            4,
            "cannot be used in terminals",
        ),
        ("start: <[1-2-3]>", 1, 8, "invalid token range"),
        ("start: @sub", 1, 8, "needs a grammars document"),
        (
            "start: x\nx[max_tokens=3]: %json {\"type\": \"array\"}",
            2,
            1,
            "rules that never recur",
        ),
        (
            "start: x\nx[max_tokens=3]: /a/ & /b/",
            2,
            1,
            "`max_tokens=` on a terminal built with `&` or `~`",
        ),
        (
            "start: x\nx[stop_capture=\"s\"]: /.*/",
            2,
            3,
            "stop_capture requires stop= or suffix=",
        ),
        (
            "start: x y\nx[stop=\"a\"]: /b/ y\ny: \"c\"",
            2,
            18,
            "`suffix=` and `max_tokens=` apply to terminals only",
        ),
        ("start: x\nx[foo=1]: \"a\"", 2, 3, "Unknown attribute"),
        ("start: x::1", 1, 9, "parametric rules"),
        ("start: \"a\"{3,2}", 1, 8, "range end must be >= start"),
        (
            "start: a & b\na: \"a\"\nb: \"b\"",
            1,
            8,
            "& is only supported for tokens",
        ),
        ("%import common.NOPE\nstart: NOPE", 1, 1, "Unknown common"),
        ("%import foo.BAR\nstart: BAR", 1, 1, "only Lark's `common`"),
        (
            "%llguidance {\"x\": true}\nstart: \"a\"",
            1,
            1,
            "failed to parse %llguidance",
        ),
        (
            "start: %json {\n  \"type\": [}",
            2,
            12,
            "failed to parse %json",
        ),
        (
            "start: %json {\"type\": \"nope\"}",
            1,
            8,
            "failed to compile JSON schema",
        ),
        ("rule: \"a\"", 1, 1, "no start rule"),
        (
            "start: \"a\"\n  \"b\"",
            2,
            3,
            "expected a rule, a terminal or a statement",
        ),
        ("start: myRule", 1, 8, "mixes upper and lower case"),
        (
            "start: T\nT: t\nt: \"a\"",
            2,
            4,
            "cannot be used in a terminal",
        ),
        ("start: \"a\" $", 1, 12, "unexpected character"),
    ];
    for &(text, line, column, needle) in cases {
        let (l, c, message) = error(text);
        assert!(
            message.contains(needle),
            "{text:?}: {message:?} lacks {needle:?}"
        );
        assert_eq!((l, c), (line, column), "{text:?}: {message}");
    }
}

#[test]
fn hostile_inputs_fail_fast() {
    let deep = format!("start: {}\"a\"{}", "(".repeat(5000), ")".repeat(5000));
    assert!(error(&deep).2.contains("nested deeper"));
    // A long chain of rules lowers without recursion.
    let mut chain = String::from("start: r0\n");
    for i in 0..20_000 {
        chain.push_str(&format!("r{i}: \"x\" r{}\n", i + 1));
    }
    chain.push_str("r20000: \"y\"\n");
    assert!(parse(&chain, &LarkOptions::default()).is_ok());
    let mut chain = String::from("start: T0\n");
    for i in 0..5_000 {
        chain.push_str(&format!("T{i}: \"x\" T{}\n", i + 1));
    }
    chain.push_str("T5000: \"y\"\n");
    assert!(parse(&chain, &LarkOptions::default()).is_ok());
    let big = "start: ST\nST: /[01]*1[01]{20}/ & /[01]+/";
    assert!(error(big).2.contains("cannot build this terminal"));
}

#[test]
fn long_chains_compile_without_deep_fusion() {
    // Each would be a chain of thousands of regular rules for the automaton to
    // fuse, one reference at a time.
    let text: String = (0..1500)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    language(
        &format!("start: %regex {{\"substring_chars\": \"{text}\"}}"),
        &[&text[100..900], ""],
        &["ac"],
    );
    let mut long = String::from("%ignore \" \"\nstart:");
    for _ in 0..1500 {
        long.push_str(" \"a\"?");
    }
    long.push_str(" \"z\"");
    language(&long, &["z", "a a z", "aaz"], &[" z", "a z "]);
}

#[test]
fn rule_attributes_shape_the_language_or_are_annotated() {
    // stop= keeps its text in the language (the model writes it), lazily: the
    // rule ends at the first stop.
    language(
        "start: x \"!\"\nx[stop=\"END\"]: /.*/",
        &["END!", "abcEND!"],
        &["abc!", "aENDbEND!", "abcEN!"],
    );
    // An empty stop is no stop: the body alone, greedy.
    language("start: x\nx[stop=\"\"]: /[a-z]*/", &["", "abc"], &["1"]);
    // max_tokens=0 leaves only the empty string.
    language("start: x \"!\"\nx[max_tokens=0]: /.*/", &["!"], &["a!"]);
    // Above 0, bytes read outside tokens spend nothing: the body's language
    // (tests/lark.rs counts tokens).
    language(
        "start: x \"!\"\nx[max_tokens=1]: /[a-z]*/",
        &["!", "abc!"],
        &["1!"],
    );
    // In a document, a budget over rules in a later member with references of
    // its own: the body's rules are the member's, wherever it is spliced.
    let document = serde_json::json!({"grammars": [
        {"lark_grammar": "start: \"<\" @second \">\""},
        {"name": "second", "lark_grammar": "start: ab @third\nab[max_tokens=3]: inner\ninner: \"a\"+ \"b\""},
        {"name": "third", "lark_grammar": "start: \"!\""},
    ]})
    .to_string();
    language(&document, &["<ab!>", "<aab!>"], &["<aa!>", "<b!>", "<ab>"]);
    // A nested grammar that never recurs is one budgeted lexeme: its own
    // `%ignore` inside, its language whole.
    language(
        "start: \" x\" ab \" y\"\nab[max_tokens=3]: %lark {\nstart: (\" a\")* \" b\" | c\nc: \"c\"+\n%ignore \"_\"\n}",
        &[" x b y", " x a a b y", " x a_ a_ b y", " xcc y"],
        &[" x a y", " x y", " x b b y"],
    );

    let text = "start: x y z\nx[capture, stop=/\\n/, stop_capture=\"nl\"]: /.*/\ny[capture=\"why\", temperature=0.5]: \"y\"\nz[suffix=\"s\"]: /z*/";
    let (_, report) =
        parse_with_warnings(text, &LarkOptions::default(), &Default::default()).expect("compiles");
    let got: Vec<_> = report
        .annotations
        .iter()
        .map(|a| {
            (
                a.rule.as_str(),
                a.location.line,
                a.capture.as_deref(),
                a.stop_capture.as_deref(),
                a.hidden_stop,
                a.temperature,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("x", 2, Some("x"), Some("nl"), true, None),
            ("y", 3, Some("why"), None, false, Some(0.5)),
        ]
    );
}

#[test]
fn grammars_documents_link_sub_grammars() {
    let document = serde_json::json!({"grammars": [
        {"lark_grammar": "start: \"call \" @args \";\" @2"},
        {"name": "args", "json_schema": {"type": "array", "items": {"type": "integer"}}},
        {"lark_grammar": "start: \"A\" \"!\"\n%ignore /[ \\t]+/"},
    ]})
    .to_string();
    language(
        &document,
        // The JSON member's whitespace as llguidance's (flexible, bounded here).
        &["call [1,2];A!", "call [1, 2];A!", "call [];A  !"],
        // The sub-grammar's %ignore stays inside it.
        &["call [\"x\"];A!", "call [];A!!", "call [] ;A!"],
    );

    let err = |text: &str| match parse(text, &LarkOptions::default()) {
        Err(e) => (e.to_string(), e.location().map(|l| (l.line, l.column))),
        Ok(_) => panic!("{text}: should be refused"),
    };
    // A reference outside a document, located.
    let (message, at) = err("start: \"a\"\n  | @sub");
    assert!(message.contains("needs a grammars document"), "{message}");
    assert_eq!(at, Some((2, 5)));
    // An unknown name, in its member's own lines.
    let doc = serde_json::json!({"grammars": [
        {"lark_grammar": "start: x\nx: \"a\" @nope"},
        {"name": "sub", "lark_grammar": "start: \"b\""},
    ]});
    let (message, at) = err(&doc.to_string());
    assert!(
        message.starts_with("grammars[0]: 2:8: no grammar named `nope`")
            && message.contains("`sub`"),
        "{message}"
    );
    assert_eq!(at, Some((2, 8)));
    // A member's syntax error names the member, then its line and column.
    let doc = serde_json::json!({"grammars": [
        {"lark_grammar": "start: @sub"},
        {"name": "sub", "lark_grammar": "start: \"b\"\nstart: \"c\""},
    ]});
    let (message, _) = err(&doc.to_string());
    assert!(
        message.starts_with("grammars[1] (sub): 2:1: duplicate rule"),
        "{message}"
    );
    // Shapes, by JSON pointer; nothing unknown is ignored.
    for (doc, needle) in [
        (serde_json::json!({"grammars": []}), "/grammars: is empty"),
        (
            serde_json::json!({"grammars": [{"name": "x"}]}),
            "/grammars/0: a grammar needs",
        ),
        (
            serde_json::json!({"grammars": [{"lark_grammar": 3}]}),
            "/grammars/0/lark_grammar: must be a string",
        ),
        (
            serde_json::json!({"grammars": [{"lark_grammar": "start: \"a\"", "regex": "a"}]}),
            "/grammars/0: unknown key `regex`",
        ),
        (
            serde_json::json!({"grammars": [{"lark_grammar": "start: \"a\""}], "max_tokens": 5}),
            "/max_tokens: a token budget",
        ),
        (serde_json::json!({"grammar": []}), "unknown key `grammar`"),
        (
            serde_json::json!({"grammars": [{"json_schema": {"type": "nope"}}]}),
            "/grammars/0/json_schema: failed to compile JSON schema",
        ),
    ] {
        let (message, _) = err(&doc.to_string());
        assert!(message.contains(needle), "{message} lacks {needle}");
    }
    let (message, at) = err("{\"grammars\": [\n  }");
    assert!(
        message.contains("failed to parse the grammars document"),
        "{message}"
    );
    assert_eq!(at.map(|a| a.0), Some(2));
}

#[test]
fn lazy_text_up_to_a_literal_is_one_free_text_terminal() {
    use crate::grammar::{Expr, FreeText};
    let text_of = |grammar: &str| {
        let g = parse(grammar, &LarkOptions::default()).unwrap();
        g.rules
            .iter()
            .find(|r| r.name == "x")
            .map(|r| r.expr.clone())
            .unwrap()
    };
    let until = |excludes: &[&str], stop: &str| {
        Expr::Text(Box::new(FreeText {
            excludes: excludes.iter().map(|e| e.as_bytes().to_vec()).collect(),
            stops: vec![stop.as_bytes().to_vec()],
        }))
    };
    assert_eq!(
        text_of("start: x\nx[stop=\"</a>\"]: /(.|\\n)*/"),
        until(&[], "</a>")
    );
    assert_eq!(
        text_of("start: x\nx[suffix=\"</a>\"]: /[\\s\\S]*/"),
        until(&[], "</a>")
    );
    assert_eq!(
        text_of("start: x\nx[stop=\"\\n\"]: /.*/"),
        until(&["\n"], "\n")
    );
    // Not any text: the lazy automaton, as before.
    assert!(!matches!(
        text_of("start: x\nx[stop=\"</a>\"]: /[a-z]*/"),
        Expr::Text(_)
    ));
    assert!(!matches!(
        text_of("start: x\nx[stop=\"a\\nb\"]: /.*/"),
        Expr::Text(_)
    ));
    // The same languages either way.
    language(
        "start: x \"!\"\nx[stop=\"</a>\"]: /(.|\\n)*/",
        &["</a>!", "a\n<b></a>!"],
        &["</a></a>!", "a</a", "!"],
    );
    language(
        "start: x \"!\"\nx[stop=\"\\n\"]: /.*/",
        &["\n!", "abc\n!"],
        &["abc!", "a\nb\n!"],
    );
}
