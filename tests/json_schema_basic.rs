//! Hand-written cases: each schema with texts that must be accepted or rejected.

#[path = "support/json_schema_common.rs"]
mod common;

use common::{accepts, compile};
use serde_json::json;
use stencil::frontend::json_schema::{
    compile_schema, FormatMode, JsonSchemaError, JsonSchemaOptions, PropertyOrder, SchemaDocuments,
};

fn check(schema: serde_json::Value, good: &[&str], bad: &[&str]) {
    check_with(schema, &JsonSchemaOptions::default(), good, bad)
}

fn check_with(schema: serde_json::Value, opts: &JsonSchemaOptions, good: &[&str], bad: &[&str]) {
    let g = compile(&schema, opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for t in good {
        assert!(accepts(&g, t), "{schema}: should accept {t}");
    }
    for t in bad {
        assert!(!accepts(&g, t), "{schema}: should reject {t}");
    }
}

#[test]
fn scalars() {
    check(json!({"type": "null"}), &["null"], &["nul", "0", " null"]);
    check(
        json!({"type": ["boolean", "null"]}),
        &["true", "false", "null"],
        &["1"],
    );
    check(
        json!({"type": "integer"}),
        &["0", "-12", "1.0", "-0"],
        &["01", "1.5", "1e2", "+1"],
    );
    check(
        json!({"type": "number"}),
        &["0", "-1.5e+10", "3.25"],
        &["1.", ".5", "-"],
    );
    check(
        json!({"type": "string"}),
        &[r#""""#, r#""a\"b""#, r#""\u00e9""#, "\"é\""],
        &["\"\n\"", r#""\x""#],
    );
}

#[test]
fn string_lengths_count_code_points() {
    let s = json!({"type": "string", "minLength": 2, "maxLength": 3});
    check(
        s,
        &[
            r#""ab""#,
            r#""\u00e9\u00e9\u00e9""#,
            "\"ééé\"",
            r#""\ud83d\ude00a""#,
        ],
        &[r#""a""#, r#""abcd""#, "\"éééé\""],
    );
}

#[test]
fn number_bounds() {
    check(
        json!({"type": "number", "exclusiveMinimum": -1.5, "maximum": 2.25}),
        &["-1.4", "0", "2.25", "2.2", "-1.49999", "-0"],
        &["-1.5", "2.26", "3", "-2"],
    );
    check(
        json!({"type": "integer", "minimum": 10, "exclusiveMaximum": 100}),
        &["10", "99", "50.0"],
        &["9", "100", "-50"],
    );
    check(
        json!({"type": "integer", "multipleOf": 3}),
        &["0", "3", "-9", "123"],
        &["1", "-10"],
    );
    check(
        json!({"type": "integer", "multipleOf": 5, "minimum": 10, "maximum": 30}),
        &["10", "25"],
        &["5", "35", "12"],
    );
    check(
        json!({"type": "number", "multipleOf": 0.01}),
        &["1.25", "3", "0.1"],
        &["1.255"],
    );
}

/// A decimal `multipleOf`, or non-integers, within bounds: the product of the
/// two regular languages.
#[test]
fn decimal_multiples_and_fractions_within_bounds() {
    check(
        json!({"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 100}),
        &["0", "99.99", "100", "12.5", "0.10"],
        &["100.01", "-0.01", "1.001", "101"],
    );
    check(
        json!({"type": "number", "not": {"type": "integer"}, "exclusiveMinimum": 1, "maximum": 2}),
        &["1.5", "1.99"],
        &["1", "2", "2.5", "0.5", "1.0"],
    );
    // Draft 4: `6.0` is no integer by type, but a multiple of 1.
    let draft4 = "http://json-schema.org/draft-04/schema#";
    check(
        json!({"$schema": draft4, "type": "number", "multipleOf": 1, "minimum": 0, "maximum": 10}),
        &["6", "6.0", "10.00"],
        &["6.5", "11.0"],
    );
    check(
        json!({"$schema": draft4, "type": "integer", "minimum": 0, "maximum": 10}),
        &["6"],
        &["6.0"],
    );
}

#[test]
fn numbers_that_are_no_multiple() {
    check(
        json!({"type": "integer", "not": {"multipleOf": 3}}),
        &["1", "2", "4", "-5", "100"],
        &["0", "3", "-3", "99", "1.5"],
    );
    // Numbers with a fraction are multiples of no integer.
    check(
        json!({"type": "number", "minimum": 1, "not": {"multipleOf": 2}}),
        &["1", "3", "2.5", "1.25", "1001"],
        &["2", "0", "-1", "1000", "0.5"],
    );
    // A multiple of 3, but of neither 2 nor 5: remainders modulo 30.
    check(
        json!({"type": "integer", "multipleOf": 3,
               "not": {"anyOf": [{"multipleOf": 2}, {"multipleOf": 5}]}}),
        &["3", "9", "21", "-33", "1011"],
        &["6", "15", "30", "0", "7"],
    );
    // Both bounds: enumerated.
    check(
        json!({"type": "integer", "minimum": 10, "maximum": 20, "not": {"multipleOf": 4}}),
        &["10", "11", "19"],
        &["12", "16", "20", "9", "21"],
    );
    // `not` of a power of ten: a non-zero digit past that decimal.
    check(
        json!({"type": "number", "not": {"multipleOf": 0.01}}),
        &["0.001", "1.0101", "-2.005"],
        &["1", "0.01", "1.10", "1.100"],
    );
    // `not not`: the multiples again.
    check(
        json!({"type": "integer", "not": {"not": {"multipleOf": 7}}}),
        &["0", "7", "-14"],
        &["1", "8"],
    );
}

#[test]
fn enum_values_decided_by_validation_under_not() {
    // Each value of the enum is validated against what `not` holds, whatever it uses.
    check(
        json!({"enum": [1, 2, 3, 4, 6], "not": {"multipleOf": 2}}),
        &["1", "3"],
        &["2", "4", "6", "5"],
    );
    check(
        json!({"enum": [[1, 1], [1, 2], {"a": 1}, {"b": 1}],
               "not": {"anyOf": [{"uniqueItems": true, "type": "array"},
                                 {"propertyNames": {"const": "a"}, "type": "object"}]}}),
        &["[1,1]", r#"{"b":1}"#],
        &["[1,2]", r#"{"a":1}"#],
    );
}

#[test]
fn objects_with_a_name_property_names_rejects() {
    check(
        json!({"type": "object", "not": {"propertyNames": {"not": {"const": "id"}}}}),
        &[r#"{"id":1}"#, r#"{"a":true,"id":null}"#],
        &["{}", r#"{"a":1}"#],
    );
    check(
        json!({"type": "object", "not": {"propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}}}),
        &[r#"{"A":1}"#, r#"{"abcd":1}"#, r#"{"a":1,"b2":2}"#],
        &["{}", r#"{"abc":1}"#, r#"{"a":1,"b":2}"#],
    );
}

#[test]
fn negated_closed_objects_beside_pattern_properties() {
    // Not closed: some property none of `a` or the pattern takes, of any value;
    // its value still meets the outer pattern's schema where its name matches.
    check(
        json!({"type": "object", "patternProperties": {"^n": {"type": "integer"}},
               "not": {"properties": {"a": true}, "patternProperties": {"^x": true},
                       "additionalProperties": false}}),
        &[r#"{"b":true}"#, r#"{"n1":2}"#, r#"{"a":1,"x":1,"n":3}"#],
        &["{}", r#"{"a":1}"#, r#"{"x1":true}"#, r#"{"n1":"s"}"#],
    );
}

#[test]
fn property_names_beside_pattern_properties() {
    check(
        json!({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"},
               "patternProperties": {"^x": {"type": "integer"}},
               "additionalProperties": {"type": "string"}}),
        &[r#"{"xa":1}"#, r#"{"b":"s"}"#, r#"{"xa":1,"b":"s"}"#],
        &[r#"{"xa":"s"}"#, r#"{"b":1}"#, r#"{"X":1}"#, r#"{"x1":1}"#],
    );
}

#[test]
fn exponents_where_the_sign_decides() {
    // A bound at zero takes a whole side, so exponent spellings are exact there.
    check(
        json!({"type": "number", "minimum": 0}),
        &["1e-06", "2.5E+3", "0e5", "-0e1", "0", "7"],
        &["-1e-06", "-1", "-2.5E3"],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": 0}),
        &["1e-9", "0.001e2", "3"],
        &["0e5", "0.0e3", "-0e1", "-1e2", "0"],
    );
    check(
        json!({"type": "number", "maximum": 0}),
        &["-1e5", "-0e1", "0e1", "-3"],
        &["1e-9", "5"],
    );
    // A side cut by a bound other than zero still has no exponent spellings (an
    // over-constraint, never an under-constraint): here only the negative side.
    check(
        json!({"type": "number", "exclusiveMaximum": 5}),
        &["-1e5", "0e0", "4.9"],
        &["5e0", "1e1", "5"],
    );
}

#[test]
fn enums_and_consts() {
    check(
        json!({"enum": ["a", 1, null, {"x": [1]}]}),
        &[r#""a""#, "1", "1.0", "null", r#"{"x":[1]}"#],
        &[r#""b""#, "2", r#"{"x":[2]}"#],
    );
    check(
        json!({"type": "string", "enum": ["a", 1]}),
        &[r#""a""#],
        &["1"],
    );
    check(json!({"const": "x\ny"}), &[r#""x\ny""#], &[r#""xy""#]);
    // Values equal as JSON (1 and 1.0, objects in another key order) are one
    // value; two enums intersect by that equality, and `not` excludes by it.
    check(
        json!({"allOf": [
            {"enum": [1, 1.0, {"a": 1, "b": [2.50]}, {"b": [2.5], "a": 1.0}, "x", "y"]},
            {"enum": [1.00, {"b": [2.5], "a": 1}, "y", "z"]},
            {"not": {"const": "y"}}
        ]}),
        &["1", "1.0", r#"{"a":1,"b":[2.5]}"#],
        &[r#""x""#, r#""y""#, r#""z""#, r#"{"a":1,"b":[2.6]}"#],
    );
}

#[test]
fn literal_numbers_in_every_spelling() {
    // Equal values are equal (JSON Schema compares numbers mathematically).
    check(
        json!({"enum": [7, "a"]}),
        &[
            "7", "7.0", "70e-1", "0.7e1", "7e0", "7E+0", "7e-0", "700E-2", "7.00e00", "0.07e2",
            "7e+000",
        ],
        &["7e1", "71e-1", "0.7e2", "7e", "07", "-7e0"],
    );
    check(
        json!({"const": -2.5}),
        &["-2.5", "-25e-1", "-0.25E1", "-2.50e0", "-250e-2"],
        &["-25e-2", "25e-1", "-2.5e1"],
    );
    check(
        json!({"const": 0}),
        &["0", "-0", "0.0", "0e5", "-0.0E-3", "0E+99"],
        &["1e0", "00", "0e"],
    );
    check(
        json!({"enum": [1e-30, 1e20]}),
        &[
            "1e-30",
            "1.0E-30",
            "10e-31",
            "0.1e-29",
            "1e20",
            "1E+20",
            "100000000000000000000",
            "0.000000000000000000000000000001",
        ],
        &["1e-29", "1e21", "1e2"],
    );
}

#[test]
fn objects_schema_order() {
    let s = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b"],
        "additionalProperties": false
    });
    check(
        s,
        &[
            r#"{"b":"x"}"#,
            r#"{"a":1,"b":"x","c":true}"#,
            r#"{"b":"x","c":false}"#,
        ],
        &[
            "{}",
            r#"{"a":1}"#,
            r#"{"b":"x","d":1}"#,
            r#"{"b":"x","a":1}"#,
            r#"{"b":"x","b":"y"}"#,
        ],
    );
}

#[test]
fn objects_any_order() {
    let opts = JsonSchemaOptions {
        property_order: PropertyOrder::Any,
        ..Default::default()
    };
    let s = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["b"]
    });
    check_with(
        s,
        &opts,
        &[
            r#"{"b":"x"}"#,
            r#"{"b":"x","a":1}"#,
            r#"{"z":null,"b":"x","y":2}"#,
        ],
        &[
            r#"{"a":1}"#,
            r#"{"b":"x","b":"y"}"#,
            r#"{"b":"x","a":"s"}"#,
            r#"{"b":1}"#,
        ],
    );
    // One declared property: undeclared ones may come before it.
    check_with(
        json!({"required": ["b"], "additionalProperties": {"type": "integer"}}),
        &opts,
        &[r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#, r#"{"b":2}"#],
        &[r#"{"a":1}"#, r#"{"a":1,"b":"x"}"#, r#"{"b":2,"b":3}"#],
    );
}

#[test]
fn objects_any_order_many_properties() {
    // 40 declared properties (2^40 subsets as plain rules): still exact.
    let opts = JsonSchemaOptions {
        property_order: PropertyOrder::Any,
        ..Default::default()
    };
    let names: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
    let properties: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|n| (n.clone(), json!({"type": "integer"})))
        .collect();
    let s = json!({"type": "object", "properties": properties,
                   "required": ["p3", "p39"], "additionalProperties": false});
    let all_reversed = format!(
        "{{{}}}",
        names
            .iter()
            .rev()
            .map(|n| format!("\"{n}\":1"))
            .collect::<Vec<_>>()
            .join(",")
    );
    check_with(
        s,
        &opts,
        &[
            r#"{"p39":1,"p3":2}"#,
            r#"{"p3":1,"p20":2,"p39":3,"p0":4}"#,
            &all_reversed,
        ],
        &[
            r#"{"p39":1}"#,
            r#"{"p3":1,"p39":2,"p3":3}"#,
            r#"{"p3":1,"p20":2,"p20":2,"p39":3}"#,
            r#"{"p3":1,"p39":2,"p40":3}"#,
        ],
    );
}

#[test]
fn counted_objects_with_undeclared_properties_in_any_order() {
    let opts = JsonSchemaOptions {
        property_order: PropertyOrder::Any,
        ..Default::default()
    };
    let s = json!({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["b"], "minProperties": 2, "maxProperties": 3});
    check_with(
        s,
        &opts,
        &[
            r#"{"x":0,"b":1}"#,
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"y":true,"b":2}"#,
        ],
        &[
            r#"{"b":1}"#,
            r#"{"a":1,"x":0}"#,
            r#"{"a":1,"x":0,"y":0,"b":2}"#,
            r#"{"b":1,"b":1}"#,
        ],
    );
}

#[test]
fn impossible_objects_leave_the_other_types() {
    // The object branch is impossible; the union, fused into one regex, used to
    // count as matching nothing (regex-syntax gives `a|[a&&b]` no minimum length),
    // so the whole schema failed to compile.
    check(
        json!({"type": ["object", "string"], "properties": {"a": {}, "b": {}},
               "required": ["a", "b"], "maxProperties": 1}),
        &[r#""x""#],
        &["{}", r#"{"a":1,"b":2}"#],
    );
    check(
        json!({"anyOf": [{"type": "string"},
                         {"type": "object", "properties": {"a": false}, "required": ["a"]}]}),
        &[r#""x""#],
        &["{}", r#"{"a":1}"#],
    );
}

#[test]
fn objects_with_min_properties_above_max_are_impossible() {
    // minProperties > maxProperties: no object, but the other types remain (this
    // used to fail the whole compile: "repetition has min 3 greater than max 2").
    for order in [PropertyOrder::Any, PropertyOrder::Schema] {
        let opts = JsonSchemaOptions {
            property_order: order,
            ..Default::default()
        };
        for properties in [json!({}), json!({"a": {}, "b": {}})] {
            check_with(
                json!({"type": ["object", "string"], "properties": properties,
                       "minProperties": 3, "maxProperties": 2}),
                &opts,
                &[r#""x""#],
                &["{}", r#"{"a":1,"b":2}"#, r#"{"a":1,"b":2,"c":3}"#],
            );
        }
    }
}

#[test]
fn undeclared_keys_are_every_key_but_the_declared_ones() {
    // Names that are empty, non-ASCII, escaped, or a control character (whose
    // `\u00XX` escape may spell its hex letter in either case).
    let schema = json!({
        "properties": {
            "a": {"type": "integer"}, "": {"type": "integer"}, "é": {"type": "integer"},
            "\u{1f}": {"type": "integer"}, "q\"": {"type": "integer"}, "ab": {"type": "integer"}
        },
        "additionalProperties": {"type": "string"}
    });
    let good = [
        r#"{"a":1}"#,
        r#"{"":1}"#,
        r#"{"é":1}"#,
        r#"{"\u001f":1}"#,
        r#"{"q\"":1}"#,
        r#"{"a":2,"ab":1}"#,
        r#"{"abc":"x"}"#,
        r#"{"b":"x"}"#,
        r#"{"é2":"x"}"#,
        r#"{"e":"x"}"#,
        r#"{"\u001f ":"x"}"#,
        r#"{"\u001e":"x"}"#,
        r#"{"q":"x"}"#,
        r#"{"q\"\"":"x"}"#,
        r#"{" ":"x"}"#,
    ];
    let bad = [
        r#"{"a":"x"}"#,
        r#"{"":"x"}"#,
        r#"{"é":"x"}"#,
        r#"{"\u001f":"x"}"#,
        r#"{"\u001F":"x"}"#,
        r#"{"\u001F":1}"#,
        r#"{"q\"":"x"}"#,
        r#"{"ab":"x"}"#,
    ];
    for order in [PropertyOrder::Schema, PropertyOrder::Any] {
        let opts = JsonSchemaOptions {
            property_order: order,
            ..JsonSchemaOptions::default()
        };
        check_with(schema.clone(), &opts, &good, &bad);
    }
}

#[test]
fn additional_properties_schema_and_counts() {
    check(
        json!({"additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2}),
        &[r#"{"a":1}"#, r#"{"a":1,"b":2}"#, "1", r#""s""#],
        &["{}", r#"{"a":1,"b":2,"c":3}"#, r#"{"a":"x"}"#],
    );
}

#[test]
fn pattern_properties_beside_additional_properties() {
    // additionalProperties absent (true): names matching no pattern are free.
    check(
        json!({"patternProperties": {"f.*o": {"type": "integer"}}}),
        &[
            r#"{"foo":1}"#,
            r#"{"foooooo":2,"bar":"x"}"#,
            r#"{"bar":[]}"#,
            "{}",
            r#"{"of":"x"}"#,
        ],
        &[
            r#"{"foo":"bar"}"#,
            r#"{"fooooo":"x"}"#,
            r#"{"xfyoz":1.5}"#,
            r#"{"bar":1,"foo":null}"#,
        ],
    );
    // A counted pattern beside declared names (o9814 of Github_easy): names of
    // 1 to 255 such characters take its schema, a declared name its own and the
    // pattern's.
    let (at_bound, past_bound) = ("k".repeat(255), "k".repeat(256));
    check(
        json!({"properties": {"id": {"type": "string"}},
               "patternProperties": {"^[0-9a-zA-Z_-]{1,255}$": {"type": ["number", "string"]}}}),
        &[
            &format!(r#"{{"{at_bound}":1}}"#),
            &format!(r#"{{"{past_bound}":[]}}"#),
            r#"{"id":"x","i":2,"a-b":"s","é":null}"#,
        ],
        &[
            &format!(r#"{{"{at_bound}":null}}"#),
            r#"{"id":1}"#,
            r#"{"i":null}"#,
            r#"{"a_b":[]}"#,
        ],
    );
    // A name matching several patterns takes all their schemas.
    check(
        json!({"patternProperties": {"a*": {"type": "integer"}, "aaa*": {"maximum": 20}}}),
        // Unanchored `a*` matches every name.
        &[r#"{"a":21}"#, r#"{"aaaa":18}"#, r#"{"b":1}"#],
        &[
            r#"{"aaaa":31}"#,
            r#"{"aaa":"foo"}"#,
            r#"{"a":"x"}"#,
            r#"{"b":"x"}"#,
        ],
    );
    // properties, patternProperties and additionalProperties together: a declared
    // name also takes the patterns it matches.
    check(
        json!({
            "properties": {"foo": {"type": "array", "maxItems": 3}, "bar": {"type": "array"}},
            "patternProperties": {"f.o": {"minItems": 2}},
            "additionalProperties": {"type": "integer"}
        }),
        &[
            r#"{"foo":[1,2]}"#,
            r#"{"fxo":[1,2]}"#,
            r#"{"quux":3}"#,
            r#"{"bar":[]}"#,
            r#"{"foo":[1,2],"bar":[],"fzo":[3,4],"x":1}"#,
            r#"{"fxo":1}"#, // minItems says nothing about a number
        ],
        &[
            r#"{"foo":[]}"#,
            r#"{"foo":[1,2,3,4]}"#,
            r#"{"fxo":[]}"#,
            r#"{"quux":"foo"}"#,
            r#"{"bar":1}"#,
        ],
    );
    // Names are compared decoded: an escaped quote matches `"`.
    check(
        json!({
            "patternProperties": {"\"": {"type": "null"}},
            "additionalProperties": {"type": "integer"}
        }),
        &[r#"{"a\"b":null}"#, r#"{"ab":1}"#, r#"{"\\":2}"#],
        &[r#"{"a\"b":1}"#, r#"{"ab":null}"#, r#"{"\"":3}"#],
    );
    // A declared name is never an undeclared one, whatever the escape's case.
    check(
        json!({
            "properties": {"\u{1f}": {"type": "integer"}},
            "patternProperties": {"x": {"type": "boolean"}},
            "additionalProperties": {"type": "string"}
        }),
        &[
            r#"{"\u001f":1}"#,
            r#"{"\u001e":"s"}"#,
            r#"{"x\u001F":true}"#,
        ],
        &[r#"{"\u001F":"s"}"#, r#"{"\u001f":"s"}"#, r#"{"\u001E":1}"#],
    );
    check(
        json!({
            "patternProperties": {"^\\p{Letter}+$": {"type": "number"}},
            "additionalProperties": {"type": "string"}
        }),
        &[
            r#"{"é":1}"#,
            r#"{"1":"x"}"#,
            r#"{"aé1":"x"}"#,
            r#"{"":"x"}"#,
        ],
        &[r#"{"é":"x"}"#, r#"{"1":2}"#, r#"{"ab":"x"}"#, r#"{"":1}"#],
    );
    // Two merged schemas with patterns: each part decides on its own.
    check(
        json!({"allOf": [
            {"patternProperties": {"^a": {"type": "integer"}}},
            {"patternProperties": {"b$": {"minimum": 5}}, "additionalProperties": {"type": "string"}}
        ]}),
        &[r#"{"ab":7}"#, r#"{"b":"x"}"#, r#"{"b":9}"#, r#"{"c":"x"}"#],
        &[
            r#"{"ab":3}"#,
            r#"{"a":1}"#,
            r#"{"a":"x"}"#,
            r#"{"c":1}"#,
            r#"{"ab":"x"}"#,
        ],
    );
    // Pattern schemas `false` forbid the names they match.
    check(
        json!({"patternProperties": {"f.*": true, "b.*": false}}),
        &[r#"{"foo":1}"#, r#"{"x":1}"#, r#"{"fa":1}"#],
        &[r#"{"bar":1}"#, r#"{"foobar":1}"#, r#"{"fb":1}"#],
    );
    // Closed objects: a declared name that matches a pattern, patterns with
    // different schemas.
    check(
        json!({
            "properties": {"x1": {"type": "integer"}},
            "patternProperties": {"^x": {"minimum": 0}, "^y": {"type": "string"}},
            "additionalProperties": false
        }),
        &[r#"{"x1":3}"#, r#"{"x2":"s","y":"t"}"#, "{}"],
        &[
            r#"{"x1":-3}"#,
            r#"{"x1":1.5}"#,
            r#"{"y":1}"#,
            r#"{"z":1}"#,
            r#"{"x2":-1}"#,
        ],
    );
}

#[test]
fn enum_values_checked_against_properties_and_patterns() {
    // `foo` is declared and matches `f.o`: both schemas apply to the enum's values.
    check(
        json!({
            "properties": {"foo": {}},
            "patternProperties": {"f.o": {"minItems": 2}},
            "enum": [{"foo": [1]}, {"foo": [1, 2]}]
        }),
        &[r#"{"foo":[1,2]}"#],
        &[r#"{"foo":[1]}"#],
    );
}

#[test]
fn arrays() {
    check(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
        &["[1]", "[1,2,3]"],
        &["[]", "[1,2,3,4]", "[\"a\"]"],
    );
    check(
        json!({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false}),
        &["[]", "[1]", "[1,\"a\"]"],
        &["[1,\"a\",2]", "[\"a\"]"],
    );
    check(
        json!({"type": "array", "contains": {"const": 5}}),
        &["[5]", "[1,5,2]"],
        &["[]", "[1,2]"],
    );
    // Counted: two or three fives, after a string prefix, at most five items.
    check(
        json!({"prefixItems": [{"type": "string"}], "contains": {"const": 5},
               "minContains": 2, "maxContains": 3, "maxItems": 5}),
        &["[\"a\",5,5]", "[\"a\",5,1,5,5]", "[\"a\",5,5,5]"],
        &[
            "[5,5]",
            "[\"a\",5]",
            "[\"a\",5,5,5,5]",
            "[\"a\",5,5,1,1,1]",
            "[1,5,5]",
        ],
    );
    // Two counts at once, no item bound: exactly one 1, at least two strings.
    check(
        json!({"allOf": [{"contains": {"const": 1}, "minContains": 1, "maxContains": 1},
                         {"contains": {"type": "string"}, "minContains": 2}]}),
        &["[1,\"a\",\"b\"]", "[\"a\",2,\"b\",1,\"c\"]"],
        &["[1,1,\"a\",\"b\"]", "[1,\"a\"]", "[\"a\",\"b\"]"],
    );
    // maxContains 0: no item matches.
    check(
        json!({"contains": {"type": "null"}, "minContains": 0, "maxContains": 0}),
        &["[]", "[1,2]", "{}"],
        &["[null]", "[1,null]"],
    );
}

#[test]
fn combinators_and_refs() {
    check(
        json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}),
        &["1", "\"a\""],
        &["\"ab\"", "null"],
    );
    check(
        json!({"oneOf": [{"type": "integer"}, {"type": "string"}]}),
        &["1", "\"a\""],
        &["null"],
    );
    check(
        json!({"allOf": [{"minimum": 1}, {"maximum": 3}], "type": "integer"}),
        &["1", "3"],
        &["0", "4"],
    );
    check(
        json!({"not": {"type": "string"}}),
        &["1", "null"],
        &["\"a\""],
    );
    let tree = json!({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    });
    check(
        tree,
        &[r#"{"v":1}"#, r#"{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}"#],
        &[r#"{"v":1,"kids":[{}]}"#],
    );
}

/// `$ref` into documents passed beside the schema: by URI, relative to the
/// schema's base, with the document's own relative references resolving against
/// its URI; an unknown document is an error naming the `$ref`.
#[test]
fn refs_into_passed_documents() {
    let mut documents = SchemaDocuments::default();
    documents.insert(
        "https://example.com/defs/address.json",
        json!({"type": "object", "properties": {"zip": {"$ref": "zip.json#/$defs/zip"}},
               "required": ["zip"], "additionalProperties": false}),
    );
    documents.insert(
        "https://example.com/defs/zip.json",
        json!({"$defs": {"zip": {"type": "string", "pattern": "^[0-9]{3}$"}}}),
    );
    let opts = JsonSchemaOptions {
        documents,
        ..JsonSchemaOptions::default()
    };
    let schema = json!({"$id": "https://example.com/main.json",
                        "type": "array", "items": {"$ref": "defs/address.json"}});
    check_with(
        schema,
        &opts,
        &[r#"[{"zip":"123"}]"#, "[]"],
        &[r#"[{"zip":"12"}]"#, r#"[{}]"#, r#"[{"zip":"123","x":1}]"#],
    );
    let err = compile_schema(
        &json!({"properties": {"a": {"$ref": "https://example.com/other.json"}}}),
        &opts,
    )
    .unwrap_err();
    assert_eq!(err.pointer(), Some("/properties/a/$ref"), "{err}");
}

/// `unevaluatedProperties`/`unevaluatedItems` from what the applicators that
/// hold evaluate: the `anyOf` branches that hold (all of them), the `if` that
/// holds or the `else`, a `$ref`; never `not`, nor a nested schema's siblings.
#[test]
fn unevaluated_from_the_applicators_that_hold() {
    let closed = |extra: serde_json::Value| {
        let mut s = json!({"properties": {"a": true}, "unevaluatedProperties": false});
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        s
    };
    check(
        closed(json!({"allOf": [{"properties": {"b": true}}]})),
        &[r#"{"a":1,"b":2}"#, "{}", "1"],
        &[r#"{"c":1}"#],
    );
    // Both branches hold: both evaluate.
    check(
        closed(json!({"anyOf": [
            {"properties": {"b": true}, "required": ["b"]},
            {"properties": {"c": true}, "required": ["c"]}]})),
        &[r#"{"b":1,"c":2}"#, r#"{"a":0,"b":1}"#, r#"{"c":1}"#],
        &[r#"{"b":1,"d":2}"#, r#"{"a":1}"#],
    );
    // `not` drops what its subschema evaluated.
    check(
        closed(json!({"not": {"not": {"properties": {"b": true}}}})),
        &[r#"{"a":1}"#],
        &[r#"{"b":1}"#],
    );
    // The `if` that holds evaluates with its `then`; otherwise `else` alone.
    check(
        closed(
            json!({"if": {"properties": {"t": {"const": 1}}, "required": ["t"]},
                      "then": {"properties": {"x": true}},
                      "else": {"properties": {"y": true}}}),
        ),
        &[r#"{"t":1,"x":1}"#, r#"{"y":1}"#],
        &[r#"{"t":1,"y":1}"#, r#"{"t":2,"y":1}"#, r#"{"x":1}"#],
    );
    // A nested scope sees only its own subschemas; it evaluates everything for
    // the scope around it.
    check(
        json!({"allOf": [{"properties": {"a": true}, "unevaluatedProperties": false}],
               "properties": {"b": true}, "unevaluatedProperties": false}),
        &[r#"{"a":1}"#, "{}"],
        &[r#"{"b":1}"#, r#"{"c":1}"#],
    );
    check(
        json!({"$defs": {"base": {"properties": {"id": {"type": "integer"}}}},
               "$ref": "#/$defs/base", "properties": {"name": true},
               "unevaluatedProperties": {"type": "string"}}),
        &[r#"{"id":1,"name":null,"x":"s"}"#],
        &[r#"{"id":1,"x":2}"#, r#"{"id":"1"}"#],
    );
    check(
        json!({"prefixItems": [true], "allOf": [{"prefixItems": [true, true]}],
               "unevaluatedItems": {"type": "integer"}}),
        &["[null,null]", "[null,null,1,2]", "[]"],
        &["[null,null,\"x\"]"],
    );
    // Before 2019-09 the keyword is unknown: an annotation.
    check(
        json!({"$schema": "http://json-schema.org/draft-07/schema#",
               "properties": {"a": true}, "unevaluatedProperties": false}),
        &[r#"{"b":1}"#],
        &[],
    );
}

/// `not` of any schema is the union of its constraints violated one at a time;
/// overlapping `oneOf` branches are each taken minus the others; `if` is
/// `(if and then) or (not if and else)`. All exact.
#[test]
fn negation_overlapping_one_of_and_conditionals() {
    // Branches that share values: strings longer than 2, or anything else that
    // is no string (other types satisfy `maxLength`).
    check(
        json!({"oneOf": [{"type": "string"}, {"maxLength": 2}]}),
        &[r#""abc""#, "1", "null"],
        &[r#""ab""#, r#""""#],
    );
    check(
        json!({"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]}),
        &["-1", "11"],
        &["0", "5", "10"],
    );
    // The discriminating required names of real schemas: exactly one of two.
    check(
        json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        &[r#"{"a":1}"#, r#"{"b":1,"c":2}"#],
        &[r#"{"a":1,"b":2}"#, r#"{}"#],
    );
    // Two patterns that share the all-digit strings.
    check(
        json!({"type": "string", "oneOf": [{"pattern": "^[0-9a-f]{2}$"}, {"pattern": "^[0-9A-F]{2}$"}]}),
        &[r#""ab""#, r#""AB""#],
        &[r#""12""#, r#""aB""#],
    );
    // Both of two names, an integer among a few, a pattern: each negated.
    check(
        json!({"type": "object", "not": {"required": ["x", "y"]}}),
        &[r#"{}"#, r#"{"x":1}"#, r#"{"y":1,"z":1}"#],
        &[r#"{"x":1,"y":2}"#, r#"{"y":1,"x":2}"#],
    );
    check(
        json!({"type": "integer", "not": {"enum": [6379, 6380]}}),
        &["6378", "6381", "0", "-6379"],
        &["6379", "6380"],
    );
    check(
        json!({"type": "string", "not": {"pattern": "^[a-z]+$"}}),
        &[r#""""#, r#""aB""#, r#""a1""#],
        &[r#""abc""#, r#""a""#],
    );
    // A property's value rejected by its schema: a negated child rule.
    check(
        json!({"type": "object", "not": {"properties": {"n": {"type": "integer", "maximum": 3}}}}),
        &[r#"{"n":4}"#, r#"{"n":"x","m":1}"#],
        &[r#"{}"#, r#"{"n":3}"#, r#"{"m":4}"#],
    );
    // A closed object's negation: a property none of its names.
    check(
        json!({"type": "object", "not": {"properties": {"a": {}}, "additionalProperties": false}}),
        &[r#"{"b":1}"#, r#"{"a":1,"b":2}"#, r#"{"b":1,"a":2}"#],
        &[r#"{}"#, r#"{"a":1}"#],
    );
    check(
        json!({"type": "object", "properties": {"b": {"type": "integer"}},
               "not": {"properties": {"a": {}}, "additionalProperties": {"type": "string"}}}),
        &[r#"{"b":1}"#, r#"{"a":"x","c":2}"#, r#"{"c":null,"a":1}"#],
        &[r#"{}"#, r#"{"a":1}"#, r#"{"c":"x"}"#, r#"{"b":"x"}"#],
    );
    // Twice negated, a closed object is itself again (the witness negated).
    check(
        json!({"not": {"not": {"properties": {"a": {}}, "additionalProperties": {"type": "boolean"}}}}),
        &[r#"{"a":1}"#, r#"{"a":1,"b":true}"#, "1"],
        &[r#"{"b":1}"#, r#"{"a":1,"b":null}"#],
    );
    check(
        json!({"allOf": [{"enum": [{"foo": 1}]}, {"not": {"not": {"additionalProperties": {"type": "boolean"}, "properties": {"bar": {}, "foo": {}}}}}]}),
        &[r#"{"foo":1}"#],
        &[r#"{"foo":1,"baz":true}"#],
    );
    // A property matching a pattern whose schema rejects its value; a property
    // neither declared nor matching a pattern.
    check(
        json!({"type": "object", "properties": {"x1": {"type": "integer"}},
               "not": {"patternProperties": {"^x[0-9]$": {"type": "integer"}}}}),
        &[r#"{"x2":"a"}"#, r#"{"y":1,"x3":null}"#],
        &[r#"{}"#, r#"{"x2":1}"#, r#"{"x10":"a"}"#, r#"{"x1":"a"}"#],
    );
    check(
        json!({"type": "object", "not": {"properties": {"a": {}}, "patternProperties": {"^x": {}}, "additionalProperties": false}}),
        &[r#"{"b":1}"#, r#"{"a":1,"xa":2,"y":3}"#],
        &[r#"{}"#, r#"{"a":1,"xy":2}"#],
    );
    // Two closed objects negated at once: each needs a property outside its
    // names, and one property may serve both.
    check(
        json!({"type": "object", "not": {"anyOf": [
            {"properties": {"a": {}}, "additionalProperties": false},
            {"properties": {"b": {}}, "additionalProperties": false}
        ]}}),
        &[r#"{"a":1,"b":2}"#, r#"{"c":1}"#, r#"{"b":1,"a":2,"c":3}"#],
        &[r#"{}"#, r#"{"a":1}"#, r#"{"b":1}"#],
    );
    // Untyped closed branches: disjoint on objects, equal on the other types.
    check(
        json!({"oneOf": [
            {"properties": {"k": {"const": "a"}}, "required": ["k"], "additionalProperties": false},
            {"properties": {"k": {"const": "b"}, "v": {}}, "required": ["k"], "additionalProperties": false}
        ]}),
        &[r#"{"k":"a"}"#, r#"{"k":"b","v":1}"#],
        &["1", r#"{"k":"a","v":1}"#, "null"],
    );
    // An array with an item its schema rejects; an array with none `contains` takes.
    check(
        json!({"type": "array", "not": {"items": {"type": "integer"}}}),
        &[r#"[1,"a"]"#, r#"[null]"#],
        &["[]", "[1,2]"],
    );
    check(
        json!({"type": "array", "not": {"contains": {"const": 0}}}),
        &["[]", "[1,2]"],
        &["[0]", "[1,0]"],
    );
    // `if` with a property condition, where `then` and `else` differ.
    check(
        json!({
            "type": "object",
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"required": ["x"]},
            "else": {"required": ["y"]}
        }),
        &[
            r#"{"kind":"a","x":1}"#,
            r#"{"kind":"b","y":1}"#,
            r#"{"x":1}"#,
        ],
        &[r#"{"kind":"a","y":1}"#, r#"{"kind":"b","x":1}"#],
    );
    // Before draft 7, `if` is an unknown keyword.
    check(
        json!({"$schema": "http://json-schema.org/draft-04/schema#", "if": {"type": "string"}, "then": {"maxLength": 1}}),
        &[r#""abc""#],
        &[],
    );
    // What a node cannot say stays an error naming the keyword.
    let err = compile_schema(
        &json!({"not": {"type": "array", "uniqueItems": true}}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("\"uniqueItems\" at /not/uniqueItems"),
        "{err}"
    );
    // `S = not S` through a `$ref` is bounded.
    let err = compile_schema(
        &json!({"$defs": {"s": {"not": {"$ref": "#/$defs/s"}}}, "$ref": "#/$defs/s"}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("negations"), "{err}");
}

#[test]
fn patterns_and_formats() {
    check(
        json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}),
        &[r#""abc""#],
        &[r#""abcd""#, r#""""#, r#""A""#],
    );
    check(
        json!({"type": "string", "pattern": "b"}),
        &[r#""abc""#, r#""b""#],
        &[r#""ac""#],
    );
    check(
        json!({"type": "string", "format": "date"}),
        &[r#""2024-02-29""#],
        &[r#""2023-02-29""#],
    );
    check(
        json!({"type": "string", "pattern": "^\"\\\\$"}),
        &[r#""\"\\""#],
        &[r#""\"""#],
    );
}

/// A pattern no length adjustment can cut, two patterns, a pattern with a format or
/// an excluded constant: each pair is the product of the two automata, exactly.
#[test]
fn regular_constraints_on_one_string_intersect() {
    // `format` asserts by default, annotates on request.
    let date = json!({"type": "string", "format": "date", "maxLength": 10});
    check(date.clone(), &[r#""2024-02-29""#], &[r#""tomorrow""#]);
    let annotate = JsonSchemaOptions {
        format: FormatMode::Annotate,
        ..JsonSchemaOptions::default()
    };
    check_with(date, &annotate, &[r#""tomorrow""#], &[r#""2024-02-29T00""#]);
    // Look-aheads where the string starts: patterns of their own.
    check(
        json!({"type": "string", "pattern": "^(?!org\\.bukkit\\.)(?=.*\\.)[a-z.]+$"}),
        &[r#""com.x""#, r#""org.x""#],
        &[r#""org.bukkit.x""#, r#""comx""#, r#""Com.x""#],
    );
    // Unanchored: twelve characters, some hex run among them.
    check(
        json!({"type": "string", "pattern": "[0-9a-fA-F]+", "minLength": 12, "maxLength": 12}),
        &[
            r#""zz0123456789""#,
            r#""zzzzzzzzzzzA""#,
            r#""ézzzzzzzzzzA""#,
        ],
        &[r#""zzzzzzzzzzzz""#, r#""zz01234567890""#, r#""0""#],
    );
    // Several variable parts (a CURIE), at most 10 code points.
    let curie = "^([a-z0-9-]+):([a-z0-9\\.-]+):([a-z0-9-]+)?:([a-z0-9-]+)$";
    check(
        json!({"type": "string", "pattern": curie, "maxLength": 10}),
        &[r#""a:b::c""#, r#""ab:c.d:e:f""#],
        &[r#""a:b:c""#, r#""abc:d.e:f:g""#],
    );
    // Two patterns, and a pattern with a format.
    check(
        json!({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "z$"}]}),
        &[r#""az""#, r#""abcz""#],
        &[r#""za""#, r#""a""#],
    );
    check(
        json!({"type": "string", "pattern": "^2", "format": "date"}),
        &[r#""2020-01-31""#],
        &[r#""1999-01-31""#, r#""2020-02-30""#],
    );
    check(
        json!({"type": "string", "pattern": "^[a-c]+$", "minLength": 2, "not": {"const": "ab"}}),
        &[r#""ba""#, r#""abc""#],
        &[r#""ab""#, r#""a""#],
    );
    // A long length bound keeps its count: the email format under 1024
    // characters (unrolled, a million states: refused before).
    let local = |n| "a".repeat(n);
    check(
        json!({"type": "string", "format": "email", "maxLength": 1024}),
        &[
            r#""a.b@example.com""#,
            &format!("\"{}@example.com\"", local(1012)),
        ],
        &[&format!("\"{}@example.com\"", local(1013)), r#""a.b@""#],
    );
    // Where the counted form passes its own bounds (a pattern whose count moves
    // with the length: 2,100 layers of 2,100 positions), the plain product,
    // small here, is built instead.
    check(
        json!({"type": "string", "allOf": [{"pattern": "^[a-z]{0,2100}x$"}, {"pattern": "^[a-y]"}], "maxLength": 2200}),
        &[&format!("\"{}x\"", "a".repeat(2100)), r#""ax""#],
        &[&format!("\"{}x\"", "a".repeat(2101)), r#""zx""#],
    );
    // An automaton past its bound is an error naming where, never a guess.
    let e = compile(
        &json!({"properties": {"code": {
            "type": "string",
            "allOf": [{"pattern": "^[ab]*a[ab]{24}$"}, {"pattern": "^a"}],
            "maxLength": 100
        }}}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.contains("/properties/code/allOf/0/pattern with its length bounds"),
        "{e}"
    );
}

#[test]
fn errors_name_keyword_and_pointer() {
    let e = compile_schema(
        &json!({"properties": {"tags": {"type": "array", "uniqueItems": true}}}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "unsupported keyword \"uniqueItems\" at /properties/tags/uniqueItems: uniqueItems needs items to be compared with each other (supported where items take a few values: enums, booleans, null)");
    let lenient = JsonSchemaOptions {
        lenient: true,
        ..Default::default()
    };
    let (_, warnings) = compile_schema(
        &json!({"properties": {"tags": {"uniqueItems": true, "type": "array"}}}),
        &lenient,
    )
    .unwrap();
    assert_eq!(warnings.len(), 1);
    let e = compile_schema(
        &json!({"type": "string", "pattern": "(?=a)"}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("look-around"), "{e}");
    // A property-name language over the automaton's bounds is an error naming
    // patternProperties, never an approximation.
    let e = compile_schema(
        &json!({"patternProperties": {"^[ab]*a[ab]{20}$": {"type": "integer"}}}),
        &JsonSchemaOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("unsupported keyword \"patternProperties\" at /patternProperties:"),
        "{e}"
    );
}

#[test]
fn large_bounds_stay_counters() {
    let t = std::time::Instant::now();
    let g = compile(
        &json!({"type": "string", "maxLength": 100000}),
        &Default::default(),
    )
    .unwrap();
    assert!(accepts(&g, "\"abc\""));
    let g = compile(
        &json!({"type": "array", "maxItems": 1000000, "items": {"type": "integer"}}),
        &Default::default(),
    )
    .unwrap();
    assert!(accepts(&g, "[1,2]"));
    let values: Vec<_> = (0..1000).map(|i| json!(format!("v{i}"))).collect();
    let g = compile(&json!({"enum": values}), &Default::default()).unwrap();
    assert!(accepts(&g, "\"v999\"") && !accepts(&g, "\"v1000\""));
    let props: serde_json::Map<String, serde_json::Value> = (0..500)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    let g = compile(
        &json!({"type": "object", "properties": props}),
        &Default::default(),
    )
    .unwrap();
    assert!(accepts(&g, r#"{"p0":1,"p499":2}"#));
    // Timing is measured in benchmarks, never asserted in tests (DESIGN.md).
    println!("large bounds compiled in {:?}", t.elapsed());
}

/// Core reproducer (stencil matcher): after a complete terminal with no possible
/// continuation, `allowed_bytes` reports every byte, and `consume_byte` accepts one
/// more byte. regex-automata's dense DFAs delay matches by one byte, so the state
/// after an invalid byte that follows a match is a match state, not the dead state.
#[test]
fn core_allowed_bytes_after_complete_terminal() {
    let g = stencil::compile_regex("a").unwrap();
    let mut m = stencil::Matcher::new(g);
    m.consume_bytes(b"a").unwrap();
    assert!(
        m.allowed_bytes().is_empty(),
        "allowed after `a`: {:?}",
        m.allowed_bytes()
    );
    assert!(
        m.consume_byte(b'Z').is_err(),
        "`aZ` accepted as a viable prefix"
    );
}

#[test]
fn plain_integers_drop_the_zero_fraction_for_generation() {
    let schema = json!({"type": "integer", "minimum": -3, "maximum": 300});
    check(
        schema.clone(),
        &["1", "1.0", "-3", "300.00"],
        &["1.5", "301"],
    );
    let plain = JsonSchemaOptions {
        plain_integers: true,
        ..JsonSchemaOptions::default()
    };
    check_with(
        schema,
        &plain,
        &["1", "-3", "300"],
        &["1.0", "300.00", "1.5"],
    );
    check_with(
        json!({"type": "integer"}),
        &plain,
        &["0", "-12"],
        &["0.0", "7.00", "-0"],
    );
    // Zero is written unsigned when generating; checking still accepts `-0`.
    check_with(
        json!({"type": "integer", "minimum": 0, "maximum": 120}),
        &plain,
        &["0", "120"],
        &["-0", "-1"],
    );
    check_with(
        json!({"type": "integer", "minimum": -5, "maximum": 0}),
        &plain,
        &["0", "-5", "-1"],
        &["-0", "1"],
    );
    check_with(
        json!({"type": "integer", "multipleOf": 4, "minimum": -8, "maximum": 8}),
        &plain,
        &["0", "-8", "8", "-4"],
        &["-0", "2"],
    );
    check(
        json!({"type": "integer", "maximum": 0}),
        &["-0", "0", "-3"],
        &["1"],
    );
    check_with(
        json!({"enum": [7, 2.5]}),
        &plain,
        &["7", "2.5"],
        &["7.0", "70e-1"],
    );
    check(json!({"enum": [7]}), &["7", "7.0"], &["8"]);
    // Unbounded sides stop at I-JSON's exact range when generating.
    check_with(
        json!({"type": "integer", "multipleOf": 1e-8}),
        &plain,
        &["9007199254740991", "-9007199254740991", "0"],
        &[
            "9007199254740992",
            "-9007199254740992",
            "123456789012345678901",
        ],
    );
    check_with(
        json!({"type": "integer", "multipleOf": 3, "minimum": 0}),
        &plain,
        &["12", "9007199254740990"],
        &["-3", "13", "12.0"],
    );
    check(json!({"type": "integer"}), &["123456789012345678901"], &[]);
}

#[test]
fn property_names_that_admit_a_declared_name_leave_it_to_its_own_schema() {
    check(
        json!({"type": "object", "properties": {"name": {"type": "string"}},
               "propertyNames": {"pattern": "^[a-z_]+$"}, "additionalProperties": {"type": "integer"}}),
        &[r#"{"name":"x","x_key":1}"#, r#"{"other":2}"#, "{}"],
        // `name` must not come back as an undeclared key (an integer), however spelled.
        &[r#"{"name":1}"#, r#"{"n\u0061me":1}"#, r#"{"Bad":1}"#],
    );
}

#[test]
fn an_anchor_spread_over_branches() {
    check(
        json!({"type": "string", "pattern": "^$|^https://x\\.com/"}),
        &[r#""""#, r#""https://x.com/a""#],
        &[r#""x""#, r#""ahttps://x.com/""#],
    );
}

/// `uniqueItems` over items that take few values is a permutation of those values:
/// each at most once, whatever its spelling (`1` and `1.0` are one value).
#[test]
fn unique_items_over_few_values() {
    check(
        json!({"type": "array", "items": {"enum": ["a", "b", 1, true]}, "uniqueItems": true, "maxItems": 3}),
        &["[]", r#"["a","b"]"#, r#"["b",1,true]"#, r#"[1.0,"a"]"#],
        &[r#"["a","a"]"#, "[1,1.0]", r#"[1,"a",true,"b"]"#, r#"["c"]"#],
    );
    check(
        json!({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true, "minItems": 2}),
        &["[true,false]", "[false,true]"],
        &["[true,true]", "[true]"],
    );
    // Three distinct values cannot fill four items.
    let e = compile_schema(
        &json!({"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": true, "minItems": 4}),
        &JsonSchemaOptions::default(),
    );
    assert!(matches!(e, Err(JsonSchemaError::Unsatisfiable)), "{e:?}");
}

/// `format: "regex"` alone is a grammar: groups nest at any depth, and what the
/// format's regular form rejects is rejected here too.
#[test]
fn regex_format_nests_groups_at_any_depth() {
    let encode = |texts: &[&str]| -> Vec<String> {
        texts
            .iter()
            .map(|t| serde_json::to_string(t).unwrap())
            .collect()
    };
    let valid = encode(&[
        "",
        "abc",
        r"^[a-zA-Z0-9_]{3,16}$",
        r#"^\s*(it|describe)\(\s*['"]([^'"]+)['"]"#,
        r"(?:a|b)*?c{2,}",
        r"[\d\-.]+(?=x)|\u{1F600}",
        r"(a(b)c)",
        r"((((a)|(?<!b)c)+)?)",
        r"[^]",
        "[-a-]",
    ]);
    let invalid = encode(&[
        "^(abc]", "*a", "a{2,1}", "[z-a]", r"\", "a)", "(?=a)*", "^*", r"\k<x>", "a{", "]",
        r"[\d-z]", "a???", r"\u12", r"\-", r"\c1", "((a)", "(a))",
    ]);
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    check(
        json!({"type": "string", "format": "regex"}),
        &refs(&valid),
        &refs(&invalid),
    );
}

/// Beside a pattern whose strings are all regexes, `format: "regex"` is left
/// out (it would add nothing); the pattern still decides.
#[test]
fn regex_format_beside_a_pattern_of_regexes() {
    check(
        json!({"type": "string", "format": "regex", "pattern": "^[0-9]+(a|b)$", "minLength": 1}),
        &[r#""12a""#, r#""7b""#],
        &[r#""12""#, r#""a""#, r#""1(""#],
    );
}
