//! `stencil check` as users call it: exit codes, human and JSON output, batch mode.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// A folder for one test's files, removed when the test ends (pass or fail).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("stencil-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stencil(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stencil"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stencil");
    // The process may exit before reading (e.g. on a bad grammar): ignore EPIPE.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn json_of(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

const JSON: &str = "tests/fixtures/gbnf/llama.cpp/json.gbnf";

#[test]
fn accepted_input_exits_zero() {
    let out = stencil(&["check", "--gbnf", JSON, "--json"], br#"{"a": [1, 2]}"#);
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out);
    assert_eq!(v["accepted"], true);
    assert_eq!(v["viable_prefix"], true);
    assert!(v["offset"].is_null());
}

#[test]
fn rejected_input_names_offset_and_expectation() {
    let out = stencil(&["check", "--gbnf", JSON, "--json"], br#"{"a": tru}"#);
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(v["accepted"], false);
    assert_eq!(v["viable_prefix"], false);
    assert_eq!(v["offset"], 9);
    assert_eq!(v["expected_bytes"], serde_json::json!(["'e'"]));
    assert!(!v["expected"].as_array().unwrap().is_empty());

    let human = stencil(&["check", "--gbnf", JSON], b"{\n  \"a\": tru}");
    assert_eq!(human.status.code(), Some(1));
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("byte offset 12 (line 2, column 11)"),
        "{text}"
    );
    assert!(text.contains("expected bytes: 'e'"), "{text}");
}

#[test]
fn prefix_mode() {
    let out = stencil(
        &["check", "--gbnf", JSON, "--prefix", "--json"],
        br#"{"a": [1, "x"#,
    );
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out);
    assert_eq!(v["accepted"], false);
    assert_eq!(v["viable_prefix"], true);
    assert_eq!(v["offset"], 12);

    // The same input without --prefix is incomplete: exit 1.
    let out = stencil(&["check", "--gbnf", JSON], br#"{"a": [1, "x"#);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("incomplete"));
}

#[test]
fn input_from_file_as_raw_bytes() {
    let dir = TempDir::new("input");
    let path = dir.join("input.bin");
    // A UTF-8 character split by nothing: raw bytes in, raw bytes checked.
    std::fs::write(&path, "caf\u{e9}".as_bytes()).unwrap();
    let out = stencil(
        &[
            "check",
            "--regex",
            "caf.",
            "--input",
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Invalid UTF-8 is rejected at its offset.
    std::fs::write(&path, b"caf\xff").unwrap();
    let out = stencil(
        &[
            "check",
            "--regex",
            "caf.",
            "--input",
            path.to_str().unwrap(),
            "--json",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["offset"], 3);
}

#[test]
fn jsonl_batch_mode() {
    let dir = TempDir::new("jsonl");
    let path = dir.join("cases.txt");
    std::fs::write(&path, "42\n1+2\n+\n\n7+\n").unwrap();
    let out = stencil(
        &[
            "check",
            "--regex",
            r"[0-9]+(\+[0-9]+)*",
            "--jsonl",
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "not every line passes");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdicts: Vec<bool> = lines
        .iter()
        .map(|v| v["accepted"].as_bool().unwrap())
        .collect();
    assert_eq!(verdicts, [true, true, false, false, false]);
    assert_eq!(lines[2]["offset"], 0);
    assert_eq!(lines[4]["viable_prefix"], true);

    let out = stencil(
        &[
            "check",
            "--regex",
            r"[0-9]+(\+[0-9]+)*",
            "--jsonl",
            path.to_str().unwrap(),
            "--prefix",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "`+` alone is not even a prefix");
}

#[test]
fn invalid_grammar_exits_two_with_location() {
    let dir = TempDir::new("bad");
    let path = dir.join("bad.gbnf");
    std::fs::write(&path, "root ::= item\nitem ::= \"a\" | undefined-rule\n").unwrap();
    let out = stencil(&["check", "--gbnf", path.to_str().unwrap()], b"a");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.gbnf:2:16") && err.contains("undefined-rule"),
        "{err}"
    );

    let out = stencil(&["check", "--regex", "a(b"], b"ab");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("byte offset"));

    let out = stencil(&["check", "--regex", r"\bword"], b"word");
    assert_eq!(out.status.code(), Some(2));

    let out = stencil(&["check", "--gbnf", "/nonexistent/grammar.gbnf"], b"");
    assert_eq!(out.status.code(), Some(2));

    let out = stencil(&["check"], b"");
    assert_eq!(out.status.code(), Some(2), "a grammar is required");
}

/// `--ref-dir` passes the documents a schema's `$ref`s name: a file beside the
/// schema by its relative path, another by its `$id`; without it the reference
/// is an error naming the pointer and the flag.
#[test]
fn schema_refs_reach_a_ref_dir() {
    let dir = TempDir::new("refdir");
    std::fs::create_dir_all(dir.join("defs/nested")).unwrap();
    std::fs::write(
        dir.join("defs/address.json"),
        r#"{"type":"object","properties":{"city":{"type":"string","maxLength":5}},"required":["city"],"additionalProperties":false}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("defs/nested/zip.json"),
        r#"{"$id":"https://example.com/zip.json","type":"string","pattern":"^[0-9]{5}$"}"#,
    )
    .unwrap();
    let schema = dir.join("main.json");
    std::fs::write(
        &schema,
        r#"{"properties":{"home":{"$ref":"address.json"},"zip":{"$ref":"https://example.com/zip.json"}},"required":["home","zip"],"additionalProperties":false}"#,
    )
    .unwrap();
    let (schema, defs) = (schema.to_str().unwrap(), dir.join("defs"));
    let args = [
        "check",
        "--schema",
        schema,
        "--ref-dir",
        defs.to_str().unwrap(),
    ];
    let out = stencil(&args, br#"{"home":{"city":"Paris"},"zip":"75001"}"#);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = stencil(&args, br#"{"home":{"city":"Parisx"},"zip":"75001"}"#);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = stencil(&args, br#"{"home":{"city":"Paris"},"zip":"7500"}"#);
    assert_eq!(out.status.code(), Some(1), "{out:?}");

    let out = stencil(&["check", "--schema", schema], b"{}");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/properties/home/$ref") && err.contains("--ref-dir"),
        "{err}"
    );
}

/// A batch of zero lines is zero inputs: nothing printed, exit 0.
#[test]
fn empty_jsonl_batch_is_zero_inputs() {
    let dir = TempDir::new("empty");
    let path = dir.join("none.jsonl");
    std::fs::write(&path, "").unwrap();
    let out = stencil(
        &[
            "check",
            "--regex",
            "[0-9]+",
            "--jsonl",
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // One empty line is one input (the empty string), as before.
    std::fs::write(&path, "\n").unwrap();
    let out = stencil(
        &[
            "check",
            "--regex",
            "[0-9]+",
            "--jsonl",
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

/// `{"type":"array","items": ...}` nested `depth` times around an integer.
fn nested_arrays_schema(depth: usize) -> String {
    let mut schema = String::from(r#"{"type":"integer"}"#);
    for _ in 0..depth {
        schema = format!(r#"{{"type":"array","items":{schema}}}"#);
    }
    schema
}

/// A schema nested past the limit is valid JSON: the error names stencil's nesting
/// limit, where it was reached, and the flag that raises it.
#[test]
fn deep_schemas_name_the_nesting_limit() {
    let dir = TempDir::new("deep");
    let path = dir.join("deep.json");
    std::fs::write(&path, nested_arrays_schema(3_000)).unwrap();
    let path = path.to_str().unwrap();
    let out = stencil(&["check", "--schema", path], b"[]");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("not JSON"), "{err}");
    assert!(
        err.contains("nesting limit of 128") && err.contains("--max-nesting"),
        "{err}"
    );
    // The 129th `{` opens at column 1 + 24 * 128 (`{"type":"array","items":` is 24 bytes).
    assert!(err.contains(&format!("{path}:1:{}", 1 + 24 * 128)), "{err}");

    // Raised, the same schema compiles and checks: `depth` arrays around `inner`.
    let check_raised = |depth: usize, inner: &str| {
        let input = format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth));
        let out = stencil(
            &["check", "--schema", path, "--max-nesting", "5000"],
            input.as_bytes(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stderr)
    };
    let (code, stderr) = check_raised(3_000, "");
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = check_raised(3_000, "7");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(check_raised(2_999, "7").0, Some(1));
}

#[test]
fn lark_grammars_check_like_gbnf() {
    let dir = TempDir::new("lark");
    let good = dir.join("call.lark");
    std::fs::write(
        &good,
        "%import common.WS\n%ignore WS\nstart: NAME \"(\" %json {\"type\": \"integer\"} \")\"\nNAME: /[a-z]+/\n",
    )
    .unwrap();
    let good = good.to_str().unwrap();
    assert_eq!(
        stencil(&["check", "--lark", good], b"f ( 42 )")
            .status
            .code(),
        Some(0)
    );
    let out = stencil(&["check", "--lark", good, "--json"], b"f(x)");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["offset"], 2);

    let bad = dir.join("bad.lark");
    std::fs::write(&bad, "start: item\nitem: \"a\" @sub\n").unwrap();
    let out = stencil(&["check", "--lark", bad.to_str().unwrap()], b"a");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.lark:2:11") && err.contains("needs a grammars document"),
        "{err}"
    );
    // The same reference inside a grammars document (JSON) links to the member.
    let document = dir.join("doc.json");
    let members = serde_json::json!({"grammars": [
        {"lark_grammar": "start: item\nitem: \"a\" @sub"},
        {"name": "sub", "lark_grammar": "start: /[0-9]+/"},
    ]});
    std::fs::write(&document, members.to_string()).unwrap();
    let document = document.to_str().unwrap();
    assert_eq!(
        stencil(&["check", "--lark", document], b"a42")
            .status
            .code(),
        Some(0)
    );
    let out = stencil(&["check", "--lark", document, "--json"], b"ab");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["offset"], 1);

    let out = stencil(&["check", "--lark", good, "--gbnf", JSON], b"");
    assert_eq!(out.status.code(), Some(2), "one grammar flag at a time");

    // stop= is enforced (its text is in the language) and noted, located.
    let stop = dir.join("stop.lark");
    std::fs::write(&stop, "start: line \"!\"\nline[stop=\"\\n\"]: /.*/\n").unwrap();
    let stop = stop.to_str().unwrap();
    let out = stencil(&["check", "--lark", stop], b"abc\n!");
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stop.lark:2:1: rule `line`: its stop= text is kept"),
        "{err}"
    );
    assert_eq!(
        stencil(&["check", "--lark", stop], b"abc!").status.code(),
        Some(1)
    );
}

/// A grammar with special tokens: names need `--tokenizer`; `--token-ids`
/// checks token ids, offsets in tokens; a name the vocabulary lacks is located.
#[test]
fn token_grammars_check_token_ids() {
    let dir = TempDir::new("tokens");
    let tokenizer = format!(
        "{}/tests/fixtures/tokenizers/mistral-7b-v0.1/tokenizer.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let vocab = stencil::vocab::Vocabulary::from_tokenizer_file(&tokenizer).unwrap();
    let id = |text: &str| vocab.ids_named(text)[0];
    let grammar = dir.join("tags.lark");
    std::fs::write(&grammar, "start: <s> WORD+ <unk>\nWORD: /[a-z]+/\n").unwrap();
    let grammar = grammar.to_str().unwrap();

    let out = stencil(&["check", "--lark", grammar], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tags.lark:1:8") && err.contains("--tokenizer"),
        "{err}"
    );

    let check = |ids: String, extra: &[&str]| {
        let mut args = vec![
            "check",
            "--lark",
            grammar,
            "--tokenizer",
            &tokenizer,
            "--token-ids",
        ];
        args.extend_from_slice(extra);
        stencil(&args, ids.as_bytes())
    };
    let good = format!("[1, {}, {}, 0]", id("ab"), id("c"));
    let out = check(good.clone(), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("accepted (4 tokens)"));
    // A second `<s>` where a word or `<unk>` must come: rejected at token 2.
    let out = check(format!("[1, {}, 1]", id("ab")), &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_of(&out);
    assert_eq!(report["offset"], 2);
    assert_eq!(report["unit"], "tokens");
    // Stopping short is a viable prefix.
    let out = check(format!("[1, {}]", id("ab")), &["--prefix"]);
    assert_eq!(out.status.code(), Some(0));
    let lines = dir.join("ids.jsonl");
    std::fs::write(&lines, format!("{good}\n[0]\n")).unwrap();
    let out = check(String::new(), &["--jsonl", lines.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 2, "{text}");
    // Not token ids: exit 2 with the place.
    let out = check("[1, \"x\"]".into(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1 column"));

    let bad = dir.join("bad.lark");
    std::fs::write(&bad, "start: \"a\"\n  | <|nope|>\n").unwrap();
    let out = stencil(
        &[
            "check",
            "--lark",
            bad.to_str().unwrap(),
            "--tokenizer",
            &tokenizer,
        ],
        b"a",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.lark:2:5: the vocabulary has no token `<|nope|>`"),
        "{err}"
    );
}

/// A structural tag whose delimiters are the vocabulary's special tokens:
/// with `--tokenizer` and `--token-ids`, they are read as those tokens (as in
/// generation); without, as text.
#[test]
fn structural_tags_check_token_ids() {
    let dir = TempDir::new("tag-tokens");
    let tokenizer = format!(
        "{}/tests/fixtures/tokenizers/mistral-7b-v0.1/tokenizer.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let vocab = stencil::vocab::Vocabulary::from_tokenizer_file(&tokenizer).unwrap();
    let id = |text: &str| vocab.ids_named(text)[0];
    let tag = dir.join("tag.json");
    std::fs::write(
        &tag,
        r#"{"type": "structural_tag", "format": {"type": "sequence", "elements": [
  {"type": "const_string", "value": "ab"},
  {"type": "tag", "begin": "<s>", "content": {"type": "regex", "pattern": "[a-z]+"}, "end": "<unk>"}]}}"#,
    )
    .unwrap();
    let tag = tag.to_str().unwrap();
    let check = |ids: String, extra: &[&str]| {
        let mut args = vec![
            "check",
            "--structural-tag",
            tag,
            "--tokenizer",
            &tokenizer,
            "--token-ids",
        ];
        args.extend_from_slice(extra);
        stencil(&args, ids.as_bytes())
    };
    let (bos, unk) = (id("<s>"), id("<unk>"));
    let out = check(format!("[{}, {bos}, {}, {unk}]", id("ab"), id("c")), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The end tag must be `<unk>` (or its text): EOS there is refused, at token 3.
    let out = check(
        format!("[{}, {bos}, {}, 2]", id("ab"), id("c")),
        &["--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["offset"], 3);
    // As text, the delimiters are their spelling.
    let out = stencil(&["check", "--structural-tag", tag], b"ab<s>c<unk>");
    assert_eq!(out.status.code(), Some(0));
}

const GPT2: &str = "tests/fixtures/tokenizers/gpt2/tokenizer.json.gz";

/// `bench --lark` runs a Lark grammar over an input's tokens (stencil alone here:
/// the peers are a `--features peers` build's), repeated and cold like `--gbnf`;
/// a grammar with a mistake is the user's error, located, before anything runs.
#[test]
fn bench_runs_lark_grammars() {
    let dir = TempDir::new("bench-lark");
    let grammar = dir.join("call.lark");
    std::fs::write(
        &grammar,
        "%import common.WS\n%ignore WS\nstart: NAME \"(\" %json {\"type\": \"integer\"} \")\"\nNAME: /[a-z]+/\n",
    )
    .unwrap();
    let input = dir.join("call.txt");
    std::fs::write(&input, "max ( 42 )").unwrap();
    let (grammar, input) = (grammar.to_str().unwrap(), input.to_str().unwrap());
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "--tokenizer",
            GPT2,
            "--lark",
            grammar,
            "--input",
            input,
            "--no-peers",
        ];
        args.extend_from_slice(extra);
        stencil(&args, b"")
    };
    let out = bench(&["--json", "--repeat", "2", "--cold"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["schemas"]["compiled"], 1);
    assert_eq!(v["instances"]["valid_rejected"], 0, "{v}");
    assert!(v["masks"].as_u64().unwrap() >= 4, "{v}");
    let out = bench(&[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("stencil"));

    let bad = dir.join("bad.lark");
    let bench_bad = || {
        let bad = bad.to_str().unwrap();
        stencil(
            &[
                "bench",
                "--tokenizer",
                GPT2,
                "--lark",
                bad,
                "--input",
                input,
            ],
            b"",
        )
    };
    std::fs::write(&bad, "start: item\nitem: \"a\" @sub\n").unwrap();
    let out = bench_bad();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.lark:2:11") && err.contains("needs a grammars document"),
        "{err}"
    );
    // The same reference inside a grammars document (JSON) links to the member.
    let document = dir.join("doc.json");
    let members = serde_json::json!({"grammars": [
        {"lark_grammar": "start: item\nitem: \"a\" @sub"},
        {"name": "sub", "lark_grammar": "start: /[0-9]+/"},
    ]});
    std::fs::write(&document, members.to_string()).unwrap();
    let document = document.to_str().unwrap();
    assert_eq!(
        stencil(&["check", "--lark", document], b"a42")
            .status
            .code(),
        Some(0)
    );
    let out = stencil(&["check", "--lark", document, "--json"], b"ab");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["offset"], 1);

    // A token the vocabulary lacks is placed where the grammar names it.
    std::fs::write(&bad, "start: item\nitem: \"a\" <|eot_id|>\n").unwrap();
    let out = bench_bad();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.lark:2:11"), "{err}");

    let out = stencil(
        &[
            "bench",
            "--tokenizer",
            GPT2,
            "--lark",
            grammar,
            "--gbnf",
            JSON,
            "--input",
            input,
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "one grammar at a time");
    let out = stencil(&["bench", "--tokenizer", GPT2, "--lark", grammar], b"");
    assert_eq!(out.status.code(), Some(2), "--lark needs --input");
}

/// `bench --structural-tag`: stencil's masks over the shipped tool-call input; a
/// bad tag is the user's error with its JSON pointer.
#[test]
fn bench_runs_structural_tags() {
    let out = stencil(
        &[
            "bench",
            "--tokenizer",
            GPT2,
            "--structural-tag",
            "benches/inputs/tool-calls.structural_tag.json",
            "--input",
            "benches/inputs/tool-calls.txt",
            "--no-peers",
            "--json",
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["instances"]["valid_rejected"], 0, "{v}");
    assert!(v["masks"].as_u64().unwrap() > 100, "{v}");

    let dir = TempDir::new("bench-tag");
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"type": "structural_tag", "format": {"type": "tag"}}"#,
    )
    .unwrap();
    let out = stencil(
        &[
            "bench",
            "--tokenizer",
            GPT2,
            "--structural-tag",
            bad.to_str().unwrap(),
            "--input",
            "benches/inputs/tool-calls.txt",
            "--no-peers",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/format/begin"), "{err}");
}
