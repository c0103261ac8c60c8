"""Every option the README documents for a command is accepted by that command: the flags in each
`umscope CMD ...` code span, and in the code spans of the description of CMD's row of the command table, are
looked up in CMD's parser (the app command's options included, which come from the runner's registry and,
for llm, from the llm runner's own parser); and every option `umscope app run llm` offers reaches the llm
runner in a form its parser takes (issue 34: --compile, --matvec, --no-graph, --profile were documented and
offered, and refused by the runner)."""
import argparse
import re
from pathlib import Path

import pytest

from umscope import apps, cli
from umscope.apps import llm

README = Path(__file__).resolve().parent.parent / "README.md"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def documented() -> dict:
    """command -> {flag: the README text it was read from}."""
    out = {}

    def add(cmd, text):
        for f in FLAG.findall(text):
            out.setdefault(cmd, {}).setdefault(f, text[:120])

    for line in README.read_text().splitlines():
        spans = re.findall(r"`([^`]+)`", line)
        row_cmd = None
        if line.startswith("| `umscope "):
            row_cmd = spans[0].split()[1]
        for span in spans:
            if "umscope " in span:
                # `umscope profile --um-trace -- umscope place --kind managed -- python prog.py`: each part
                # belongs to the command that starts it.
                for part in span.split("umscope ")[1:]:
                    words = part.split()
                    if words:
                        add(words[0], part)
            elif row_cmd and span.startswith("--"):
                add(row_cmd, span)
    return out


def _options(parser) -> set:
    if parser.lazy_options:  # the app command adds its options when first used
        add, parser.lazy_options = parser.lazy_options, None
        add(parser)
    return {s for a in parser._actions for s in a.option_strings}


def _subparsers():
    p = cli.build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_the_readme_documents_options_of_the_main_commands():
    docs = documented()
    assert {"run", "bench", "app", "profile", "place"} <= set(docs)
    assert {"--compile", "--matvec", "--no-graph", "--profile"} <= set(docs["app"])


def test_every_documented_option_is_accepted_by_its_command():
    subs = _subparsers()
    missing = []
    for cmd, flags in sorted(documented().items()):
        assert cmd in subs, f"the README documents `umscope {cmd}`, which is no command"
        have = _options(subs[cmd])
        missing += [f"umscope {cmd} {f} (README: {text!r})" for f, text in sorted(flags.items()) if f not in have]
    assert not missing, "\n".join(missing)


def _sample(o):
    return {"flag": True, "choice": (o["choices"] or ["x"])[-1], "int": "2"}.get(o["type"], "pinned")


def test_every_llm_option_the_cli_offers_reaches_the_runner_in_a_form_it_parses():
    offered = apps.APPS["llm"].options
    assert {"compile", "matvec", "no-graph", "profile", "model", "tokens"} <= set(offered)
    given = {k: _sample(o) for k, o in offered.items()}
    case = apps.app_cases("llm", ["explicit"], given)[0]
    argv = case.argv({"device": 0, "reps": 3, "warmup": 1, "allow_oversubscription": True})
    a = llm.parse_args(argv[3:])
    assert a.graph is False and a.profile is True and a.compile == "off" and a.matvec == "triton"
    assert a.model == "codellama-34b" and a.tokens == 2 and a.reps == 3 and a.allow_oversubscription


def test_the_llm_runner_takes_its_flags_alone_or_with_1_or_0():
    assert llm.parse_args(["--no-graph", "--profile"]).graph is False
    assert llm.parse_args(["--no-graph", "0"]).graph is True
    with pytest.raises(SystemExit):
        llm.parse_args(["--profile", "yes"])


def test_the_cli_refuses_an_llm_option_that_is_not_the_runners():
    from umscope.errors import UsageError
    with pytest.raises(UsageError):
        cli.build_parser().parse_args(["app", "run", "llm", "--no-such-option", "1"])
