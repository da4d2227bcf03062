#!/usr/bin/env bash
# Seeds tests/fuzz/corpus/{gbnf_parse,lark_parse,regex_parse,matcher} from the repository's
# grammars, so fuzzing starts deep. Run from anywhere; corpus/ is git-ignored.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
c="$here/corpus"
mkdir -p "$c/gbnf_parse" "$c/lark_parse" "$c/regex_parse" "$c/matcher" "$c/json_schema"

# gbnf_parse: every GBNF file as is.
for f in "$root"/grammars/*.gbnf "$root"/tests/fixtures/gbnf/*.gbnf "$root"/tests/fixtures/gbnf/*/*.gbnf; do
  cp "$f" "$c/gbnf_parse/$(basename "$(dirname "$f")")-$(basename "$f")"
done

# lark_parse: the Lark files, and every grammar of the vendored Lark test vectors.
cp "$root"/tests/fixtures/lark/*.lark "$c/lark_parse/"
for f in "$root"/tests/fixtures/lark/*.cases.json; do
  python3 - "$f" "$c/lark_parse/$(basename "$f" .cases.json)" <<'PY'
import json, sys
for i, case in enumerate(json.load(open(sys.argv[1]))):
    if case.get("grammar"):
        open(f"{sys.argv[2]}-{i}", "w").write(case["grammar"])
PY
done

# lark_parse: grammars documents and special tokens too.
cat > "$c/lark_parse/document-0" <<'JSON'
{"grammars": [{"lark_grammar": "start: \"call \" @args \";\" @2 <think> @1"},
 {"name": "args", "json_schema": {"type": "array", "items": {"type": "integer"}}},
 {"lark_grammar": "start: \"A\" \"!\"\n%ignore /[ \\t]+/"}]}
JSON
printf '%s\n' 'start: <think> x </think> y <[0-3]>' 'x[lazy]: /.*/ "."' 'y[stop="\n", capture]: /[a-z]+/' > "$c/lark_parse/tokens-0"

# regex_parse: a few patterns in the dialect the front-end accepts.
i=0
for p in '^[a-z]{1,8}@[a-z]+\.(com|org)$' '\d{3}-\d{4}' '(ab|cd)*e?' '[^\x00-\x1F"]{0,100}' \
         '-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?' '(?i)true|false|null' '[α-ω]+\p{Han}*' \
         'x{2,5}y{3}z{0,}' '(a(b(c)?)?)+' '.'; do
  printf '%s' "$p" > "$c/regex_parse/seed-$i"; i=$((i + 1))
done

# matcher: grammar, 0x00, an input the grammar accepts.
seed() { # name grammar-file input
  { cat "$2"; printf '\0%s' "$3"; } > "$c/matcher/$1"
}
g="$root/grammars"; l="$root/tests/fixtures/gbnf/llama.cpp"
seed json          "$g/json.gbnf"            '{"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {}}'
seed json-bounded  "$g/json-bounded.gbnf"    '{"k": [1, 2, {"z": "q"}]}'
seed tool-call     "$g/tool-call.gbnf"       '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
seed tool-call-2   "$g/tool-call.gbnf"       '{"name": "web_search", "arguments": {"query": "rust \"fuzz\"", "limit": 10}}'
seed vllm-sql      "$root/tests/fixtures/gbnf/vllm-sql.gbnf" 'SELECTcol_1fromtable_2wherecol_2=1'
seed arithmetic    "$l/arithmetic.gbnf"      $'x= (a+1)\n'
seed list          "$l/list.gbnf"            $'- one\n- two\n'
seed chess         "$l/chess.gbnf"           $'1. e4 e5\n2. Nf3 Nc6\n'
seed japanese      "$l/japanese.gbnf"        'こんにちは 世界'
seed english       "$l/english.gbnf"         'The cat sat.'
seed json_arr      "$l/json_arr.gbnf"        $'[\n{"a": 1},\n2]'
seed c             "$l/c.gbnf"               'int main(){return 0;}'
# With rollback commands (0x00 k) in the input part.
{ cat "$g/json.gbnf"; printf '\0{"ab\0\002c": [1\0\001, 2]}'; } > "$c/matcher/json-rollback"
# json_schema: the JSON Schema Test Suite's schemas with each of their instances
# (schema, 0x00, instance), when ../shared holds it, and a few combinator cases.
suite="$root/../shared/data/json-schema-test-suite"
if [ -d "$suite" ]; then
  python3 - "$suite" "$c/json_schema" <<'PY'
import json, os, sys
n = 0
for dirpath, _, files in os.walk(sys.argv[1]):
    for f in sorted(files):
        # Formats compile slowly under ASan (seconds for `format: regex`): left to
        # the mutations, so the first pass over the seeds stays short.
        if not f.endswith(".json") or "remotes" in dirpath or "optional" in dirpath:
            continue
        try:
            groups = json.load(open(os.path.join(dirpath, f)))
        except Exception:
            continue
        if not isinstance(groups, list):
            continue
        for g in groups:
            for t in g.get("tests", [])[:1]:
                data = json.dumps(g["schema"]).encode() + b"\0" + json.dumps(t["data"]).encode()
                open(os.path.join(sys.argv[2], f"suite-{n}"), "wb").write(data)
                n += 1
PY
fi
printf '%s\0%s' '{"oneOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"properties": {"a": {"maximum": 3}}}}' '{"a": 4}' > "$c/json_schema/combinators-0"
printf '%s\0%s' '{"not": {"not": {"properties": {"a": {}}, "additionalProperties": false}}}' '{"a": 1}' > "$c/json_schema/combinators-1"
printf '%s\0%s' '{"if": {"properties": {"k": {"const": 1}}}, "then": {"required": ["x"]}, "else": {"not": {"pattern": "^a"}}}' '"b"' > "$c/json_schema/combinators-2"
echo "seeded $(ls "$c"/*/ | wc -l) files under $c"
