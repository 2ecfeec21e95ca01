"""Issue 29 item 15 in the workflow file: ``max_prompt_chars`` is an llm key with a
documented default, settable in ``defaults:``, checked like every integer."""

from __future__ import annotations

from agac.config.model import DEFAULT_MAX_PROMPT_CHARS

BASE = "input: {path: data.jsonl}\n"


def test_i29_15_the_cap_has_a_default_and_defaults_set_it(wf) -> None:
    checked = wf.check(BASE + "actions:\n  - {name: a, model: mock/x, prompt: p}\n")
    assert checked.workflow is not None
    assert checked.workflow.action("a").max_prompt_chars == DEFAULT_MAX_PROMPT_CHARS == 8_000_000
    wf.write("def f(inputs, ctx):\n    return {}\n", name="tools.py")
    checked = wf.check(
        BASE + "defaults: {max_prompt_chars: 1000}\nactions:\n"
        "  - {name: a, model: mock/x, prompt: p}\n"
        "  - {name: b, model: mock/x, prompt: p, max_prompt_chars: 50}\n"
        "  - {name: t, kind: tool, function: 'tools:f'}\n"
    )
    assert checked.workflow is not None, checked.problems
    assert [a.max_prompt_chars for a in checked.workflow.actions] == [
        1000,
        50,
        DEFAULT_MAX_PROMPT_CHARS,
    ]


def test_i29_15_a_bad_cap_is_located(wf) -> None:
    checked = wf.check(
        BASE + "actions:\n  - name: a\n    model: mock/x\n    prompt: p\n    max_prompt_chars: 0\n"
    )
    assert checked.one("invalid_value").line == checked.line_of("max_prompt_chars")
    checked = wf.check(
        BASE + "actions:\n  - name: t\n    kind: tool\n    function: 'tools:f'\n"
        "    max_prompt_chars: 10\n"
    )
    assert checked.one("not_an_llm_action").line == checked.line_of("max_prompt_chars")
