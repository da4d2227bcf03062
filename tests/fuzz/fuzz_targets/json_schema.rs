#![no_main]
//! A JSON Schema and, after a `0x00`, a JSON instance. Compiling the schema never
//! panics (nor does checking the instance), and an instance the grammar accepts is
//! valid for the independent `jsonschema` crate (formats asserted, as stencil
//! asserts them): the front-end never accepts an invalid document, `not` and
//! `oneOf` included.

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use stencil::frontend::json_schema::{
    compile_schema, parse_schema_text, JsonSchemaOptions, PropertyOrder, DEFAULT_MAX_NESTING,
};
use stencil::{CompiledGrammar, Matcher};

fuzz_target!(|data: &[u8]| {
    let (schema, instance) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let Ok(schema) = std::str::from_utf8(schema) else {
        return;
    };
    let Ok(schema) = parse_schema_text(schema, DEFAULT_MAX_NESTING) else {
        return;
    };
    let options = JsonSchemaOptions {
        property_order: PropertyOrder::Any,
        ..Default::default()
    };
    let Ok((grammar, _)) = compile_schema(&schema, &options) else {
        return;
    };
    let Ok(compiled) = CompiledGrammar::compile(&grammar, &Default::default()) else {
        return;
    };
    let Some(instance) = instance.and_then(|i| serde_json::from_slice::<serde_json::Value>(i).ok())
    else {
        return;
    };
    let text = serde_json::to_string(&instance).unwrap();
    let mut matcher = Matcher::new(Arc::new(compiled));
    if !(matcher.consume_bytes(text.as_bytes()).is_ok() && matcher.is_accepting()) {
        return;
    }
    // Schemas the validator cannot build (remote references, its regex dialect)
    // prove nothing either way.
    let Ok(validator) = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
    else {
        return;
    };
    assert!(
        validator.is_valid(&instance),
        "accepted an invalid instance: {text} for {schema}"
    );
});
