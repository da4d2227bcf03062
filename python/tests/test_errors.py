"""Errors at the boundary: bad grammars raise ValueError carrying the library's
location (JSON pointer, line:column), and no Rust panic reaches Python as
anything but a RuntimeError."""

import pytest

import stencil
from stencil import _stencil


def test_bad_gbnf_has_line_and_column(gpt2_compiler):
    with pytest.raises(ValueError) as e:
        gpt2_compiler.compile_gbnf('root ::= "a"\nitem ::= "b" (\n')
    assert "2:" in str(e.value) or "3:" in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="root"):
        gpt2_compiler.compile_gbnf('item ::= "b"')
    with pytest.raises(ValueError, match="start"):
        gpt2_compiler.compile_gbnf('item ::= "b"', root="start")


def test_bad_lark_has_line_and_column(gpt2_compiler):
    with pytest.raises(ValueError) as e:
        gpt2_compiler.compile_lark('start: "a" item\nitem: "b" | \n  )')
    assert "3:" in str(e.value), str(e.value)


def test_bad_regex_has_offset(gpt2_compiler):
    with pytest.raises(ValueError, match="offset"):
        gpt2_compiler.compile_regex("ab(c")


def test_bad_schema_has_json_pointer(gpt2_compiler):
    schema = {"type": "object", "properties": {"a": {"type": "string", "minLength": "x"}}}
    with pytest.raises(ValueError) as e:
        gpt2_compiler.compile_json_schema(schema)
    assert "/properties/a" in str(e.value), str(e.value)
    unsupported = {"properties": {"when": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(ValueError) as e:
        gpt2_compiler.compile_json_schema(unsupported)
    assert "/properties/when" in str(e.value), str(e.value)
    # lenient: the same keyword becomes a warning with its pointer.
    g = gpt2_compiler.compile_json_schema(unsupported, lenient=True)
    assert any("/properties/when" in w for w in g.warnings), g.warnings


def test_bad_schema_text_has_line_and_column(gpt2_compiler):
    with pytest.raises(ValueError) as e:
        gpt2_compiler.compile_json_schema('{"type":\n  "object",, }')
    assert str(e.value).startswith("2:"), str(e.value)
    with pytest.raises(ValueError, match="nests"):
        gpt2_compiler.compile_json_schema("[" * 200 + "]" * 200)


def test_bad_options(gpt2_compiler):
    with pytest.raises(ValueError, match="whitespace"):
        gpt2_compiler.compile_json_schema({}, whitespace="wide")
    with pytest.raises(ValueError, match="property_order"):
        gpt2_compiler.compile_json_schema({}, property_order="sorted")


def test_structural_tag_errors_name_the_pointer(gpt2_compiler):
    with pytest.raises(ValueError, match="needs `format`"):
        gpt2_compiler.compile_structural_tag({"type": "structural_tag"})
    with pytest.raises(ValueError, match="/format/elements/0/value"):
        gpt2_compiler.compile_structural_tag(
            {"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "const_string"}]}}
        )
    with pytest.raises(ValueError, match="not JSON"):
        gpt2_compiler.compile_structural_tag('{"type": ')


def test_panic_becomes_runtime_error():
    with pytest.raises(RuntimeError) as e:
        _stencil._panic_for_test()
    # A RuntimeError proper, not pyo3's PanicException (a BaseException).
    assert type(e.value) is RuntimeError
    assert "forced by _panic_for_test" in str(e.value)


def test_panic_in_a_worker_thread_becomes_runtime_error():
    with pytest.raises(RuntimeError) as e:
        _stencil._panic_for_test(in_worker=True)
    assert type(e.value) is RuntimeError
    assert "in a worker" in str(e.value)
    # The module keeps working afterwards.
    assert stencil.allocate_token_bitmask(1, 32).shape == (1, 1)
