"""`stencil serve` through the official `openai` SDK, unchanged: every
structured output must validate, tool calls must parse, streams must assemble
with the SDK's own helpers, and faults must raise the SDK's error classes."""

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest
from pydantic import BaseModel

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name", "age", "email"],
    "additionalProperties": False,
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}

TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}

ASK = [{"role": "user", "content": "What is the weather in Paris? Use the tools."}]


def person_format(strict=True):
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": strict}}


def check_call(call, tools=(WEATHER, TIME)):
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    assert call.type == "function"
    assert call.id
    assert call.function.name in by_name, call.function.name
    jsonschema.validate(json.loads(call.function.arguments), by_name[call.function.name])


def test_plain_chat(client, server):
    r = client.chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "Say hello."}], max_tokens=12, seed=1
    )
    assert r.object == "chat.completion"
    assert r.model != "anything"  # a one-model server reports its own name
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    models = client.models.list()
    assert [m.id for m in models.data] == [r.model]


def test_json_schema_strict_validates(client):
    for seed in range(3):
        r = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "Invent a person."}],
            response_format=person_format(),
            max_tokens=80,
            temperature=1.0,
            seed=seed,
        )
        assert r.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_json_object(client):
    r = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "A JSON object about a cat."}],
        response_format={"type": "json_object"},
        max_tokens=60,
        seed=4,
    )
    assert isinstance(json.loads(r.choices[0].message.content), dict)


class City(BaseModel):
    name: str
    country: str
    population: int


def test_parse_with_a_pydantic_model(client):
    r = client.chat.completions.parse(
        model="m",
        messages=[{"role": "user", "content": "Describe Paris."}],
        response_format=City,
        max_tokens=80,
        seed=2,
    )
    city = r.choices[0].message.parsed
    assert isinstance(city, City)


def complete_with_tools(client, stream, allow_length=False, **kwargs):
    """The chat completion, whole or assembled by the SDK's stream helper, and
    how many argument fragments the stream carried. A `length` finish raises
    unless `allow_length`."""
    if not stream:
        return client.chat.completions.create(**kwargs), 0
    fragments = 0
    with client.chat.completions.stream(**kwargs) as s:
        for event in s:
            if event.type == "tool_calls.function.arguments.delta":
                fragments += 1
        try:
            return s.get_final_completion(), fragments
        except openai.LengthFinishReasonError as e:
            if not allow_length:
                raise
            return e.completion, fragments


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "choice",
    ["required", {"type": "function", "function": {"name": "get_time"}}, "auto"],
    ids=["required", "named", "auto"],
)
def test_tool_calls(client, choice, stream):
    kwargs = dict(model="m", messages=ASK, tools=[WEATHER, TIME], tool_choice=choice, max_tokens=120, seed=7)
    # Free text (auto) may be closed by the output budget: `length`.
    r, fragments = complete_with_tools(client, stream, allow_length=choice == "auto", **kwargs)
    message = r.choices[0].message
    calls = message.tool_calls or []
    if choice == "auto":
        # Free text or calls; whatever came must parse.
        for call in calls:
            check_call(call)
        if not calls:
            assert message.content
        return
    assert calls, message
    assert r.choices[0].finish_reason == "tool_calls"
    for call in calls:
        check_call(call)
    if stream:
        # Arguments arrive as the model writes them, not in one piece at the end.
        assert fragments > len(calls), fragments
    if isinstance(choice, dict):
        assert {c.function.name for c in calls} == {"get_time"}


def test_parallel_tool_calls_false_makes_one_call(client):
    r = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER], tool_choice="required",
        parallel_tool_calls=False, max_tokens=120, seed=3,
    )
    assert len(r.choices[0].message.tool_calls) == 1
    check_call(r.choices[0].message.tool_calls[0])


def test_tool_results_go_back_into_the_conversation(client):
    first = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=120, seed=5,
    )
    call = first.choices[0].message.tool_calls[0]
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"},
    ]
    second = client.chat.completions.create(
        model="m", messages=messages, tools=[WEATHER], tool_choice="none", max_tokens=30, seed=5,
    )
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].message.content


def test_stream_with_usage(client):
    chunks = list(
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Count to five."}], max_tokens=20,
            stream=True, stream_options={"include_usage": True}, seed=1,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishes) == 1


def test_n_choices(client):
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Invent a person."}],
        response_format=person_format(), n=2, max_tokens=80, temperature=1.0, seed=11,
    )
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        jsonschema.validate(json.loads(c.message.content), PERSON)


def test_a_budget_closed_answer_is_valid_and_says_length(client):
    """Budget steering closes the document inside max_tokens: it validates, and
    finish_reason says the budget, not the model, ended it."""
    schema = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"],
              "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema, "strict": True}}
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Tell a long story about the sea."}],
        response_format=fmt, max_tokens=8, seed=5, temperature=0,
    )
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens <= 8


def test_logprobs(client):
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=5,
        logprobs=True, top_logprobs=3, seed=1, temperature=0,
    )
    content = r.choices[0].logprobs.content
    assert content and all(t.logprob <= 0 for t in content)
    sampled = [t for t in content if t.top_logprobs]
    assert sampled and all(len(t.top_logprobs) == 3 for t in sampled)


def test_logprobs_streamed(client):
    """Each content chunk carries the logprobs of the tokens it completes: together
    they spell the content, as in the whole answer."""
    kwargs = dict(
        model="m", messages=[{"role": "user", "content": "Name a color."}], max_tokens=12,
        logprobs=True, top_logprobs=2, seed=4, temperature=0,
    )
    whole = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    entries = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    with_logprobs = [c for c in chunks if c.choices and c.choices[0].logprobs]
    assert len(with_logprobs) > 1, "all logprobs in one chunk"
    assert text == whole.choices[0].message.content
    assert "".join(t.token for t in entries) == text
    assert [t.logprob for t in entries] == [t.logprob for t in whole.choices[0].logprobs.content]


def test_stop_string(client):
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "List three fruits, one per line."}],
        max_tokens=40, stop=["\n"], seed=2, temperature=0,
    )
    assert "\n" not in r.choices[0].message.content


def test_bad_schema_is_a_bad_request_naming_the_field(client):
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"pattern": "("}}}}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=ASK, response_format=bad)
    assert e.value.body["param"] == "response_format"
    assert "/properties/a/pattern" in e.value.body["message"]


def test_wrong_types_and_the_context_are_bad_requests(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=ASK, temperature="hot")
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=ASK, max_tokens=10**6)
    assert e.value.body["param"] == "max_tokens"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=[{"role": "wizard", "content": "x"}])
    assert e.value.body["param"] == "messages[0].role"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}})
    assert e.value.body["param"] == "tool_choice"


def test_tools_with_a_response_format(client):
    """Under `auto` the reply is calls or the response format's document, never
    free text; under `none`, the document; a grammar beside tools is refused."""
    kinds = set()
    for seed in range(4):
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"Invent a person, or check the weather ({seed})."}],
            tools=[WEATHER], tool_choice="auto", response_format=person_format(), max_tokens=120, seed=seed,
        )
        message = r.choices[0].message
        if message.tool_calls:
            for call in message.tool_calls:
                check_call(call, tools=(WEATHER,))
            kinds.add("calls")
        else:
            jsonschema.validate(json.loads(message.content), PERSON)
            kinds.add("document")
    assert kinds
    r = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER], tool_choice="none", response_format=person_format(),
        max_tokens=120, seed=1,
    )
    assert not r.choices[0].message.tool_calls
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="m", messages=ASK, tools=[WEATHER], extra_body={"grammar": {"regex": "a"}},
        )
    assert e.value.body["param"] == "grammar"
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "minProperties": "2"}}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], response_format=bad)
    assert e.value.body["param"] == "response_format"


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_before_a_constrained_answer(client, stream):
    """`reasoning` puts a free span first (the template's, `<think>` here), closed
    for the model after its budget; the answer after it follows the schema. The
    span comes back as `reasoning_content`, never in the content."""
    kwargs = dict(
        model="m", messages=[{"role": "user", "content": "Invent a person."}],
        response_format=person_format(), max_tokens=120, seed=4,
        extra_body={"reasoning": {"max_tokens": 8}},
    )
    if stream:
        chunks = list(client.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **kwargs))
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        reasoning = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
        content = "".join(d.content or "" for d in deltas)
        usage = chunks[-1].usage
        # Reasoning first, then content: no delta goes back to reasoning.
        kinds = ["r" if getattr(d, "reasoning_content", None) else "c" for d in deltas
                 if getattr(d, "reasoning_content", None) or d.content]
        assert "".join(kinds) == "".join(sorted(kinds, reverse=True)), kinds
    else:
        r = client.chat.completions.create(**kwargs)
        message = r.choices[0].message
        reasoning, content, usage = message.reasoning_content, message.content, r.usage
    jsonschema.validate(json.loads(content), PERSON)
    assert reasoning is not None
    # (The answer may itself mention `</think>`, inside a JSON string.)
    assert "think>" not in reasoning and not content.lstrip().startswith("<think>")
    assert 0 < usage.completion_tokens_details.reasoning_tokens <= 8
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="m", messages=ASK, extra_body={"reasoning": {"max_tokens": 0}}
        )
    assert e.value.body["param"] == "reasoning.max_tokens"


def test_stencil_grammar_extras(client):
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Pick a color."}], max_tokens=10,
        extra_body={"grammar": {"regex": "(red|green|blue)"}}, seed=3,
    )
    assert r.choices[0].message.content in ("red", "green", "blue")
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Yes or no?"}], max_tokens=10,
        extra_body={"grammar": {"lark": 'start: "yes" | "no"'}}, seed=3,
    )
    assert r.choices[0].message.content in ("yes", "no")
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="m", messages=ASK, extra_body={"grammar": {"gbnf": "root ::= missing"}}
        )
    assert e.value.body["param"] == "grammar.gbnf"


def test_every_sampling_setting_is_reachable(client):
    """vLLM's extras (repetition_penalty, min_tokens) and stencil's `sampling`
    object (any key of the library's settings) reach the sampler; wrong values
    name their field."""
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Write some letters."}], max_tokens=24,
        seed=4, temperature=0.8,
        extra_body={"grammar": {"regex": "[a-z ]{1,120}"}, "min_tokens": 8, "repetition_penalty": 1.3,
                    "sampling": {"dry": {"multiplier": 0.8}, "typical_p": 0.95}},
    )
    assert r.usage.completion_tokens >= 8, r.choices[0].message.content
    for extra, param in [
        ({"repetition_penalty": 0.5}, "repetition_penalty"),
        ({"sampling": {"nope": 1}}, "sampling"),
        ({"sampling": {"dry": {"multiplier": -1}}}, "dry.multiplier"),
        ({"sampling": "hot"}, "sampling"),
    ]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="m", messages=ASK, extra_body=extra)
        assert e.value.body["param"] == param, (extra, e.value.body)


def test_completions_logprobs(client):
    """The completions API's own logprobs shape, whole and streamed: tokens that
    spell the text, their offsets, the asked number of alternatives."""
    kwargs = dict(model="m", prompt="One, two,", max_tokens=6, seed=1, temperature=0, logprobs=2)
    r = client.completions.create(**kwargs)
    lp = r.choices[0].logprobs
    assert "".join(lp.tokens) == r.choices[0].text
    assert len(lp.token_logprobs) == len(lp.tokens) == len(lp.text_offset)
    assert lp.text_offset[0] == 0 and all(len(t) <= 2 for t in lp.top_logprobs)
    chunks = [c for c in client.completions.create(stream=True, **kwargs) if c.choices]
    tokens = [t for c in chunks if c.choices[0].logprobs for t in c.choices[0].logprobs.tokens]
    offsets = [o for c in chunks if c.choices[0].logprobs for o in c.choices[0].logprobs.text_offset]
    assert "".join(tokens) == r.choices[0].text
    assert offsets == lp.text_offset


def test_completions(client):
    r = client.completions.create(
        model="m", prompt="The capital of France is", max_tokens=8, seed=1,
        extra_body={"grammar": {"regex": " [A-Z][a-z]+\\."}},
    )
    assert re.fullmatch(r" [A-Z][a-z]+\.", r.choices[0].text)
    chunks = list(client.completions.create(model="m", prompt="One, two,", max_tokens=6, stream=True, seed=1))
    assert "".join(c.choices[0].text for c in chunks if c.choices)


def test_responses(client):
    r = client.responses.create(
        model="m", input="Invent a person.", max_output_tokens=80,
        text={"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}},
    )
    jsonschema.validate(json.loads(r.output_text), PERSON)
    r = client.responses.create(
        model="m", input="What is the weather in Paris?", tool_choice="required", max_output_tokens=120,
        tools=[{"type": "function", **WEATHER["function"]}],
    )
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather"
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER["function"]["parameters"])


def test_responses_streamed(client):
    """The SDK's `responses.stream` helper assembles the typed events: text deltas
    that add up to the final text, then a tool call's item and arguments."""
    fmt = {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}
    deltas = []
    with client.responses.stream(
        model="m", input="Invent a person.", max_output_tokens=200, temperature=0, text=fmt
    ) as stream:
        kinds = []
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert len(deltas) > 1, "the text came in one piece"
    assert final.output_text == "".join(deltas)
    jsonschema.validate(json.loads(final.output_text), PERSON)
    assert final.usage.output_tokens > 0

    with client.responses.stream(
        model="m", input="What is the weather in Paris?", tool_choice="required", max_output_tokens=120,
        tools=[{"type": "function", **WEATHER["function"]}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds, kinds
    calls = [o for o in final.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER["function"]["parameters"])


def test_sixteen_concurrent_clients_all_valid(client):
    def one(i):
        if i % 2:
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"Invent person {i}."}],
                response_format=person_format(), max_tokens=80, seed=i,
            )
            jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
        else:
            r = client.chat.completions.create(
                model="m", messages=ASK, tools=[WEATHER, TIME], tool_choice="required", max_tokens=120, seed=i,
            )
            for call in r.choices[0].message.tool_calls:
                check_call(call)
        return i

    with ThreadPoolExecutor(16) as pool:
        assert sorted(pool.map(one, range(16))) == list(range(16))


def gauge(server, name):
    return float(re.search(rf"^{name} (\S+)$", server.metrics(), re.M).group(1))


def counter(server, outcome):
    m = re.search(rf'^stencil_requests_total{{outcome="{outcome}"}} (\S+)$', server.metrics(), re.M)
    return float(m.group(1)) if m else 0.0


def test_a_client_that_disconnects_frees_its_slot(client, server):
    cancelled = counter(server, "cancelled")
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Write a long story."}], max_tokens=2000,
        stream=True, seed=1,
    )
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    test_sixteen_concurrent_clients_all_valid(client)
    assert counter(server, "cancelled") == cancelled + 1
    assert gauge(server, "stencil_batch_size") == 0
    assert gauge(server, "stencil_queue_depth") == 0


def test_api_key_and_a_full_queue(guarded):
    from openai import OpenAI

    wrong = OpenAI(base_url=guarded.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    right = OpenAI(base_url=guarded.url + "/v1", api_key="sekret", max_retries=0, timeout=600)
    assert right.models.list().data
    # Batch of one, queue of one: a third request at once is refused with 429.
    outcomes = []
    lock = threading.Lock()

    def one():
        try:
            right.chat.completions.create(model="m", messages=ASK, max_tokens=60, seed=1)
            result = "ok"
        except openai.RateLimitError as e:
            assert e.response.headers.get("retry-after")
            result = "429"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "429" in outcomes and "ok" in outcomes, outcomes


def test_metrics(server):
    text = server.metrics()
    for name in ["stencil_requests_total", "stencil_completion_tokens_total", "stencil_queue_depth",
                 "stencil_batch_size", "stencil_mask_seconds_total", "stencil_forward_seconds_total"]:
        assert name in text


def server_with_tool_format(name):
    """A server told to use tool-call format `name` (the default model's
    template has none: the format is described in the system prompt), and a
    client of it; the caller stops the server."""
    from conftest import Server
    from openai import OpenAI

    s = Server("--tool-format", name, "--max-batch", "4")
    return s, OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def qwen_xml_client():
    s, client = server_with_tool_format("qwen-xml")
    yield client
    s.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_in_qwen_xml(qwen_xml_client, stream):
    kwargs = dict(model="m", messages=ASK, tools=[WEATHER, TIME], tool_choice="required", max_tokens=120, seed=7)
    r, fragments = complete_with_tools(qwen_xml_client, stream, **kwargs)
    calls = r.choices[0].message.tool_calls
    assert calls and r.choices[0].finish_reason == "tool_calls", r
    for call in calls:
        check_call(call)
    if stream:
        # Each parameter arrives once it is closed.
        assert fragments >= len(calls), fragments
    # The call goes back into the conversation in the same format.
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [calls[0].model_dump()]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": "18 degrees and sunny"},
    ]
    second = qwen_xml_client.chat.completions.create(
        model="m", messages=messages, tools=[WEATHER, TIME], tool_choice="none", max_tokens=30, seed=5,
    )
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].message.content


@pytest.fixture(scope="module")
def harmony_client():
    """gpt-oss's harmony messages, spelled in text (the default model's
    vocabulary has no harmony tokens)."""
    s, client = server_with_tool_format("harmony")
    yield client
    s.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_in_harmony(harmony_client, stream):
    kwargs = dict(model="m", messages=ASK, tools=[WEATHER, TIME], tool_choice="required", max_tokens=160, seed=7)
    r, fragments = complete_with_tools(harmony_client, stream, **kwargs)
    message = r.choices[0].message
    assert message.tool_calls and r.choices[0].finish_reason == "tool_calls", r
    # One call per turn: the call ends it.
    assert len(message.tool_calls) == 1
    check_call(message.tool_calls[0])
    # Headers are the format's, never content.
    assert "<|channel|>" not in (message.content or "")
    if stream:
        assert fragments >= 1
    # No call asked for: the answer's text alone, whole or streamed.
    answer, _ = complete_with_tools(
        harmony_client, stream, allow_length=True,
        **dict(kwargs, tool_choice="none", max_tokens=60),
    )
    reply = answer.choices[0].message
    assert reply.tool_calls is None
    for text in [reply.content or "", getattr(reply, "reasoning_content", None) or ""]:
        assert "<|channel|>" not in text and "<|message|>" not in text, reply
