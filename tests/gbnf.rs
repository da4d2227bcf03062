//! The GBNF front-end end to end: every llama.cpp example grammar compiles and
//! accepts and rejects strings written by reading it; every syntax feature of the
//! dialect; and bad grammars fail with an error that names line and column.

use std::sync::Arc;

use stencil::frontend::gbnf::{parse, GbnfOptions};
use stencil::frontend::FrontendError;
use stencil::{compile_gbnf, CompiledGrammar, Error, Matcher};

fn fixture(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn accepts(grammar: &Arc<CompiledGrammar>, input: &str) -> bool {
    let mut m = Matcher::new(Arc::clone(grammar));
    m.consume_bytes(input.as_bytes()).is_ok() && m.is_accepting()
}

fn assert_language(name: &str, grammar: &Arc<CompiledGrammar>, accept: &[&str], reject: &[&str]) {
    for s in accept {
        assert!(accepts(grammar, s), "{name}: should accept {s:?}");
    }
    for s in reject {
        assert!(!accepts(grammar, s), "{name}: should reject {s:?}");
    }
}

fn grammar_file(path: &str) -> Arc<CompiledGrammar> {
    compile_gbnf(&fixture(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn llama_cpp_arithmetic() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/arithmetic.gbnf");
    assert_language(
        "arithmetic",
        &g,
        &[
            "1+2=3\n",
            "x = (y +2)\n",
            "a*b-c=d\ne1 = 42\n",
            "(  a )=1\n",
        ],
        &[
            "",
            "1+2=3",
            "=3\n",
            "1++2=3\n",
            "X=1\n",
            "1=2\n3\n",
            "x = 1+2\n",
        ],
    );
}

#[test]
fn llama_cpp_c() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/c.gbnf");
    assert_language(
        "c",
        &g,
        &[
            "",
            "int main(){return 0;}",
            "int f(int x){x = x+1;return x;}",
            "float g(){while(a<b){a = a+1;}}",
            "char h(){// note\n}",
            "int k(){/* a * b */if(a==b){}else{}}",
        ],
        &[
            "int main(){return 0}",
            "main(){}",
            "int f(){return;}",
            "int f(){/* open }",
        ],
    );
}

#[test]
fn llama_cpp_chess() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/chess.gbnf");
    assert_language(
        "chess",
        &g,
        &[
            "1. e4 e5\n2. Nf3 Nc6\n",
            "1. d4 d5\n2. c4 dxc4\n3. O-O O-O-O\n",
            "1. e4 e5\n12. e8=Q+ Kxe8#\n",
        ],
        &[
            "1. e4 e5\n",
            "1. e4\n2. d4 d5\n",
            "1. e9 e5\n2. a3 a6\n",
            "2. e4 e5\n2. a3 a6\n",
        ],
    );
}

#[test]
fn llama_cpp_english() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/english.gbnf");
    assert_language(
        "english",
        &g,
        &["Hello, world!", "a\tb\nc", "x"],
        &["", " leading", "trailing ", "two  spaces", "caf\u{e9}"],
    );
}

#[test]
fn llama_cpp_japanese() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/japanese.gbnf");
    assert_language(
        "japanese",
        &g,
        &["こんにちは", "カタカナ 漢字", "日本語、です"],
        &["", "abc", "こんにちは ", "日本 語x"],
    );
}

#[test]
fn llama_cpp_json() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/json.gbnf");
    assert_language(
        "json",
        &g,
        &[
            "{}",
            r#"{"a": 1, "b": [true, false, null], "c": {"d": "e\n\u00e9"}}"#,
            "{\"x\":-0.5e15}",
            "{\n  \"k\": []\n}",
        ],
        &[
            "[]",
            "{",
            r#"{"a": 01}"#,
            r#"{"a": tru}"#,
            "{\"a\":\"\x01\"}",
            r#"{"a" 1}"#,
            r#"{"a": 1,}"#,
        ],
    );
}

#[test]
fn llama_cpp_json_arr() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/json_arr.gbnf");
    assert_language(
        "json_arr",
        &g,
        &["[\n]", "[\n1,\n\"two\",\n{\"three\": 3}]", "[\n [1, 2]]"],
        &["[]", "[1]", "[\n1,2]", "[\n1,\n2] "],
    );
}

#[test]
fn llama_cpp_list() {
    let g = grammar_file("tests/fixtures/gbnf/llama.cpp/list.gbnf");
    assert_language(
        "list",
        &g,
        &["- one\n", "- one\n- two words\n", "- \u{e9}t\u{e9}\n"],
        &["", "- \n", "-one\n", "- one", "- a\rb\n", "- a\u{2028}b\n"],
    );
}

#[test]
fn vllm_sql() {
    let g = grammar_file("tests/fixtures/gbnf/vllm-sql.gbnf");
    assert_language(
        "vllm-sql",
        &g,
        &["SELECTcol_1fromtable_2wherecol_2=1"],
        &[
            "SELECT col_1 from table_2 where col_2=1",
            "SELECTcol_3fromtable_1wherecol_1=1",
        ],
    );
}

#[test]
fn shipped_json_grammars() {
    let json = grammar_file("grammars/json.gbnf");
    let bounded = grammar_file("grammars/json-bounded.gbnf");
    let both = [
        "0",
        "-1.5e+3",
        "\"caf\u{e9} \\u00e9 \\/\"",
        "[1,[2,[3]]]",
        "{\"a\":{\"b\":[]}}",
        "{\n  \"a\": 1,\n  \"b\": [\n    true\n  ]\n}",
        "[ ]",
    ];
    let neither = [
        "", "01", "1.", ".5", "[1,]", "{\"a\"}", "\"\\x\"", "\"a\tb\"", "nul", "[1] 2",
    ];
    assert_language("json", &json, &both, &neither);
    assert_language("json-bounded", &bounded, &both, &neither);
    // RFC whitespace: unbounded in json.gbnf, bounded in json-bounded.gbnf.
    assert_language("json", &json, &[" \r\n\t[ 1 ,\t2 ]\r\n", "[1,    2]"], &[]);
    assert_language(
        "json-bounded",
        &bounded,
        &[],
        &[" [1]", "[1,    2]", "[1]\n", "[\r\n1]"],
    );
}

#[test]
fn shipped_tool_call_grammar() {
    let g = grammar_file("grammars/tool-call.gbnf");
    assert_language(
        "tool-call",
        &g,
        &[
            r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}"#,
            r#"{"name": "web_search", "arguments": {"query": "rust \"gbnf\"", "limit": 10}}"#,
        ],
        &[
            r#"{"name": "get_weather", "arguments": {"city": "", "unit": "celsius"}}"#,
            r#"{"name": "web_search", "arguments": {"query": "x", "limit": 11}}"#,
            r#"{"name": "send_email", "arguments": {}}"#,
        ],
    );
}

#[test]
fn syntax_features() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        // Escapes name code points, encoded as UTF-8.
        (r#"root ::= "\x41\u00e9\U0001F600\t\n\\\"""#, &["A\u{e9}\u{1F600}\t\n\\\""], &["A"]),
        (r#"root ::= [^a-c\]]"#, &["d", "\u{e9}", "\u{1F600}"], &["a", "b", "]", "", "dd"]),
        (r#"root ::= [-a] [a-]"#, &["--", "aa", "-a"], &["b-"]),
        ("root ::= . .", &["ab", "\u{e9}\u{1F600}"], &["a", "abc"]),
        ("root ::= \"a\"{3}", &["aaa"], &["aa", "aaaa"]),
        ("root ::= \"a\"{2,}", &["aa", "aaaaaa"], &["a"]),
        ("root ::= \"a\"{1,3}", &["a", "aaa"], &["", "aaaa"]),
        ("root ::= \"a\"{,2}", &["", "aa"], &["aaa"]),
        ("root ::= \"a\"{ 1 , 2 }", &["a", "aa"], &[""]),
        ("root ::= (\"ab\" | \"c\")+ \"d\"?", &["ab", "cabd", "ccc"], &["", "d", "abdd"]),
        ("root ::= x y\nx ::= \"x\" # comment\n# line comment\ny ::= \"y\"", &["xy"], &["x"]),
        ("root ::= \"a\"\n   | \"b\"\n   | \"c\"", &["a", "b", "c"], &["ab"]),
        ("root ::= \"a\" |\n  \"b\"", &["a", "b"], &[]),
        ("root ::= ( \"a\"\n  \"b\" )", &["ab"], &["a"]),
        ("root ::= | \"a\"", &["", "a"], &["aa"]),
        ("root::=\"a\"", &["a"], &[]),
        ("root ::= rule_with-dash9\nrule_with-dash9 ::= \"z\"", &["z"], &[]),
        ("root ::= \"\u{e9}\"", &["\u{e9}"], &["e"]),
        ("root ::= ([x]*)*", &["", "x", "xxx"], &["y"]),
        ("root ::= (\"a\"?){3}", &["", "a", "aaa"], &["aaaa"]),
        // Left recursion and ambiguity are fine (llama.cpp rejects the former).
        ("root ::= root \"a\" | \"a\"", &["a", "aaaa"], &["", "b"]),
        ("root ::= root root | \"a\"", &["a", "aaaaa"], &[""]),
        (
            "root ::= asdf\nasdf ::= \"a\" | foo \"b\"\nfoo ::= \"c\" | empty asdf \"d\" | \"e\"\nempty ::= \"blah\" | ",
            &["a", "cb", "adb", "blahadb", "eb"],
            &["b", "ad"],
        ),
    ];
    for (grammar, accept, reject) in cases {
        let g = compile_gbnf(grammar).unwrap_or_else(|e| panic!("{grammar:?}: {e}"));
        assert_language(grammar, &g, accept, reject);
    }
}

#[test]
fn large_counters_are_not_unrolled() {
    // Each of these would be tens of thousands of copies if unrolled.
    let g = compile_gbnf("root ::= \"ab\"{0,2000} \"c\"").unwrap();
    assert!(g.memory_usage() < 1 << 20, "memory {}", g.memory_usage());
    assert!(accepts(&g, &format!("{}c", "ab".repeat(2000))));
    assert!(!accepts(&g, &format!("{}c", "ab".repeat(2001))));

    let g = compile_gbnf("root ::= [a-z]{3,100000}").unwrap();
    assert!(g.memory_usage() < 1 << 20, "memory {}", g.memory_usage());
    assert!(!accepts(&g, "ab"));
    assert!(accepts(&g, &"q".repeat(3000)));

    let g = compile_gbnf("root ::= (\"[\" root \"]\"){0,1000000}").unwrap();
    assert!(accepts(&g, "[][[]][]"));
}

/// Compiles, expecting a front-end syntax error; returns (line, column, message).
fn syntax_error(grammar: &str) -> (u32, u32, String) {
    match parse(grammar, &GbnfOptions::default()) {
        Err(FrontendError::Syntax { location, message }) => {
            (location.line, location.column, message)
        }
        other => panic!("{grammar:?}: expected a syntax error, got {other:?}"),
    }
}

#[test]
fn syntax_errors_name_line_and_column() {
    let cases: &[(&str, u32, u32, &str)] = &[
        ("root ::= foo", 1, 10, "never defined"),
        (
            "root ::= \"a\"\nexpr ::= term\nterm ::= numero\n",
            3,
            10,
            "`numero` is used but never defined",
        ),
        ("root ::= \"abc", 1, 10, "unterminated string"),
        ("root ::= [abc", 1, 10, "unterminated character class"),
        ("root ::= \"\\q\"", 1, 11, "unknown escape"),
        ("root ::= \"\\x4\"", 1, 11, "needs 2 hex digits"),
        ("root ::= \"\\uD800\"", 1, 11, "not a Unicode scalar value"),
        ("root ::= [z-a]", 1, 11, "reversed"),
        ("root ::= \"a\"{3,2}", 1, 13, "minimum above its maximum"),
        ("root ::= \"a\"{99999999999}", 1, 14, "above the limit"),
        ("root ::= (\"a\"", 1, 10, "unclosed `(`"),
        ("root ::= \"a\")", 1, 13, "unmatched `)`"),
        (
            "root ::= \"a\"\nroot ::= \"b\"",
            2,
            1,
            "already defined at 1:1",
        ),
        ("root = \"a\"", 1, 6, "expected `::=`"),
        ("root ::= * \"a\"", 1, 10, "must follow an item"),
        ("root ::= <[10 ]>", 1, 10, "bad token reference"),
        (
            "  \n  root ::= \"a\" b ::= \"b\"",
            2,
            16,
            "starts before the previous rule ended",
        ),
        ("root ::= \"caf\u{e9}\" @", 1, 17, "found '@'"),
    ];
    for &(grammar, line, column, needle) in cases {
        let (l, c, message) = syntax_error(grammar);
        assert!(
            message.contains(needle),
            "{grammar:?}: message {message:?} lacks {needle:?}"
        );
        assert_eq!((l, c), (line, column), "{grammar:?}: {message}");
    }
}

#[test]
fn structural_errors() {
    match compile_gbnf("rot ::= \"a\"") {
        Err(Error::Frontend(FrontendError::MissingRoot { root })) => assert_eq!(root, "root"),
        other => panic!("{other:?}"),
    }
    let empty = compile_gbnf("root ::= \"a\" root\n")
        .unwrap_err()
        .to_string();
    assert!(
        empty.contains("language is empty") && empty.contains("line 1:1"),
        "{empty}"
    );
    let empty_class = compile_gbnf("root ::= [^\\x00-\\U0010FFFF]")
        .unwrap_err()
        .to_string();
    assert!(empty_class.contains("language is empty"), "{empty_class}");
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(1000), ")".repeat(1000));
    let (_, _, message) = syntax_error(&deep);
    assert!(message.contains("nested deeper"), "{message}");
}

#[test]
fn another_start_rule_can_be_chosen() {
    let options = GbnfOptions {
        root: "other".into(),
        ..GbnfOptions::default()
    };
    let grammar = parse("root ::= \"a\"\nother ::= \"b\"", &options).unwrap();
    let compiled = Arc::new(CompiledGrammar::compile(&grammar, &Default::default()).unwrap());
    assert!(accepts(&compiled, "b"));
    assert!(!accepts(&compiled, "a"));
}

/// A chain of 3,000 rules, each a character then the next rule, compiles (the
/// fusion of regular rules stops at a depth instead of recursing once per rule)
/// and matches exactly its one string.
#[test]
fn long_rule_chains_compile() {
    let n = 3000;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!("r{i} ::= \"a\" r{}\n", i + 1));
    }
    text.push_str(&format!("r{n} ::= \"b\"\nroot ::= r0\n"));
    let grammar = compile_gbnf(&text).unwrap();
    let mut matcher = Matcher::new(Arc::clone(&grammar));
    let input = format!("{}b", "a".repeat(n));
    matcher.consume_bytes(input.as_bytes()).unwrap();
    assert!(matcher.is_accepting());
    let mut matcher = Matcher::new(grammar);
    assert!(matcher.consume_bytes(&input.as_bytes()[1..]).is_err());
}
