#!/usr/bin/env python3
"""An agent in its own process, on Python's standard library alone, trained unchanged by effect-rl.

It speaks OpenAI chat completions to whatever OPENAI_BASE_URL and OPENAI_API_KEY name (under
`effect-rl train-agent`, its rollout's endpoint on the rollout gateway, where every turn is recorded),
reads its scenario as JSON from stdin, and prints its report as its last line: {"reward": ..., "metrics": ...}.

The task is the `minimal` example's: answer a question with "yes" or "no" (the choice is constrained with
vLLM's `structured_outputs`, which the embedded backend and the hosted service take); the reward is 1 for the
scenario's expected answer. Train it:

    npx effect-rl train-agent "python3 examples/agents/python/agent.py" \
        --scenarios examples/agents/scenarios.jsonl --steps 5
"""
import json
import os
import sys
import urllib.error
import urllib.request


def chat(messages, **settings):
    """One chat completion, as any OpenAI client would send it."""
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps({"model": os.environ.get("OPENAI_MODEL", "policy"), "messages": messages, **settings}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        sys.exit(f"chat completion failed with {error.code}: {error.read().decode(errors='replace')}")


def main():
    scenario = json.loads(sys.stdin.read() or os.environ["EFFECT_RL_SCENARIO"])
    completion = chat(
        [{"role": "user", "content": scenario["question"]}],
        structured_outputs={"choice": ["yes", "no"]},
        max_completion_tokens=4,
    )
    answer = (completion["choices"][0]["message"]["content"] or "").strip()
    expected = scenario.get("expected", "yes")
    print(json.dumps({"reward": 1.0 if answer == expected else 0.0, "metrics": {"said_yes": answer == "yes"}}))


if __name__ == "__main__":
    main()
