"""MM2's Connect transforms and predicates as k2k transform steps: each supported class and
option, predicates and negate, MM2's precedence between the flow and the top level, escaping
into CEL, and the one-line refusal of what k2k cannot run (or its skipping on request)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import cel
import pytest
import yaml

from k2k.config.mm2 import all_notes, flow_config, read_mm2
from k2k.errors import ConfigError

K2K = [sys.executable, "-m", "k2k"]
T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + text, encoding="utf-8")
    return path


def _steps(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    """The flow A->B's transforms stage (between source and sink), [] without one."""
    (flow,) = read_mm2(_write(tmp_path, text)).flows
    stages = flow.pipeline["replication"]
    assert list(stages[0]) == ["source"] and list(stages[-1]) == ["sink"]
    return stages[1]["transforms"] if len(stages) == 3 else []


def _notes(tmp_path: Path, text: str, **kwargs: Any) -> list[str]:
    return all_notes(read_mm2(_write(tmp_path, text), **kwargs))


def _refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        read_mm2(_write(tmp_path, text))
    assert len(caught.value.problems) == 1
    return caught.value.problems[0]


def _truth(expression: str, **record: Any) -> bool:
    result = cel.compile(expression).execute(record)
    assert isinstance(result, bool)
    return result


def _chain(*lines: str, transforms: str = "", predicates: str = "") -> str:
    head = [f"A->B.transforms = {transforms}"] if transforms else []
    head += [f"A->B.predicates = {predicates}"] if predicates else []
    return "\n".join([*head, *(f"A->B.{line}" for line in lines)]) + "\n"


def test_filter_with_topic_name_matches_drops_records_of_whole_matching_target_topics(
    tmp_path: Path,
) -> None:
    text = _chain(
        f"transforms.f.type = {T}Filter",
        "transforms.f.predicate = isTest",
        f"predicates.isTest.type = {P}TopicNameMatches",
        "predicates.isTest.pattern = A\\\\.test.*",  # the file's escape: the regex A\.test.*
        transforms="f",
        predicates="isTest",
    )
    (step,) = _steps(tmp_path, text)
    drop = step["filter"]["drop"]
    assert set(step) == {"filter"} and set(step["filter"]) == {"drop"}
    # Connect's TopicNameMatches matches the whole name; MM2's records carry the remote name.
    assert _truth(drop, targetTopic="A.test-1")
    assert not _truth(drop, targetTopic="B.A.test-1")  # matched at the start only
    assert not _truth(drop, targetTopic="AXtest")  # the dot is a literal dot
    assert _notes(tmp_path, text) == []  # every mapped property is accounted for


def test_filter_without_predicate_drops_every_record(tmp_path: Path) -> None:
    assert _steps(tmp_path, _chain(f"transforms.all.type = {T}Filter", transforms="all")) == [
        {"filter": {"drop": "true"}}
    ]


def test_negate_inverts_the_predicate(tmp_path: Path) -> None:
    text = _chain(
        f"transforms.f.type = {T}Filter",
        "transforms.f.predicate = prod",
        "transforms.f.negate = true",
        f"predicates.prod.type = {P}TopicNameMatches",
        "predicates.prod.pattern = A\\\\.prod-.*",
        transforms="f",
        predicates="prod",
    )
    ((_, spec),) = _steps(tmp_path, text)[0].items()
    assert spec["drop"].startswith("!(")
    assert not _truth(spec["drop"], targetTopic="A.prod-orders")  # kept: the predicate holds
    assert _truth(spec["drop"], targetTopic="A.dev-orders")  # dropped


def test_predicates_become_the_when_of_other_steps(tmp_path: Path) -> None:
    text = _chain(
        f"transforms.tag.type = {T}InsertHeader",
        "transforms.tag.header = origin",
        "transforms.tag.value.literal = eu-west",
        "transforms.tag.predicate = traced",
        f"transforms.clean.type = {T}DropHeaders",
        "transforms.clean.headers = x-internal, x-debug",
        "transforms.clean.predicate = tomb",
        "transforms.clean.negate = false",
        f"predicates.traced.type = {P}HasHeaderKey",
        "predicates.traced.name = trace",
        f"predicates.tomb.type = {P}RecordIsTombstone",
        transforms="tag, clean",
        predicates="traced, tomb",
    )
    tag, clean = _steps(tmp_path, text)
    when = '"trace" in headers'
    assert tag == {"insertHeader": {"name": "origin", "value": "eu-west", "when": when}}
    assert _truth(when, headers={"trace": "t1"})
    assert not _truth(when, headers={"other": "t1"})
    assert clean == {"dropHeaders": {"names": ["x-internal", "x-debug"], "when": "value == null"}}
    assert _truth("value == null", value=None)
    assert not _truth("value == null", value="{}")


def test_mask_field_value_and_key(tmp_path: Path) -> None:
    text = _chain(
        f"transforms.m.type = {T}MaskField$Value",
        "transforms.m.fields = ssn, card",
        f"transforms.k.type = {T}MaskField$Key",
        "transforms.k.fields = email",
        "transforms.k.replacement = ***",
        transforms="m, k",
    )
    assert _steps(tmp_path, text) == [
        {"maskFields": {"fields": ["value.ssn", "value.card"]}},
        {"maskFields": {"fields": ["key.email"], "replacement": "***"}},
    ]


def test_replace_field_filters_fields_before_renaming_them(tmp_path: Path) -> None:
    text = _chain(
        f"transforms.r.type = {T}ReplaceField$Value",
        "transforms.r.renames = cust:customer, amt:amount",
        "transforms.r.exclude = secret",
        "transforms.r.include = cust, amt, secret",
        f"transforms.old.type = {T}ReplaceField$Key",
        "transforms.old.whitelist = id",
        "transforms.old.blacklist = tmp",
        transforms="r, old",
    )
    assert _steps(tmp_path, text) == [
        {"keepFields": {"fields": ["value.cust", "value.amt", "value.secret"]}},
        {"dropFields": {"fields": ["value.secret"]}},
        {"renameFields": {"fields": {"value.cust": "customer", "value.amt": "amount"}}},
        {"keepFields": {"fields": ["key.id"]}},
        {"dropFields": {"fields": ["key.tmp"]}},
    ]


def test_insert_field_static_value(tmp_path: Path) -> None:
    text = _chain(
        f"transforms.i.type = {T}InsertField$Value",
        "transforms.i.static.field = origin?",  # Connect's optional-field mark
        "transforms.i.static.value = 42",
        f"transforms.k.type = {T}InsertField$Key",
        "transforms.k.static.field = region",
        "transforms.k.static.value = eu",
        transforms="i, k",
    )
    assert _steps(tmp_path, text) == [
        {"insertField": {"field": "value.origin", "value": "42"}},  # Connect inserts a string
        {"insertField": {"field": "key.region", "value": "eu"}},
    ]


def test_insert_field_metadata_options_are_unsupported_naming_the_option(tmp_path: Path) -> None:
    text = _chain(
        f"transforms.i.type = {T}InsertField$Value",
        "transforms.i.topic.field = from",
        transforms="i",
    )
    line = _refusal(tmp_path, text)
    assert line.startswith(
        f"{tmp_path / 'mm2.properties'}: transform i (A->B.transforms.i.type = "
        f"{T}InsertField$Value): A->B.transforms.i.topic.field: only static.field is supported: "
    )


def test_short_aliases_are_accepted_as_connect_accepts_them(tmp_path: Path) -> None:
    text = _chain(
        "transforms.f.type = Filter",
        "transforms.f.predicate = p",
        "predicates.p.type = HasHeaderKey",
        "predicates.p.name = skip",
        transforms="f",
        predicates="p",
    )
    assert _steps(tmp_path, text) == [{"filter": {"drop": '"skip" in headers'}}]


def test_flow_lists_win_over_top_level_ones_and_options_come_from_the_flow_only(
    tmp_path: Path,
) -> None:
    """MM2 keeps the top-level `transforms` list (a connector key) unless the flow has its
    own, but drops top-level `transforms.<name>.*`: the options come from `A->B.` alone."""
    top_list = (
        "transforms = tag\n"
        "transforms.tag.header = ignored\n"
        "A->B.transforms.tag.type = InsertHeader\n"
        "A->B.transforms.tag.header = h\n"
        "A->B.transforms.tag.value.literal = v\n"
    )
    assert _steps(tmp_path, top_list) == [{"insertHeader": {"name": "h", "value": "v"}}]
    (note,) = _notes(tmp_path, top_list)
    assert note.endswith(
        "transforms.tag.header: MM2 ignores top-level transform and predicate options in "
        "dedicated mode (its connectors take only the transforms and predicates lists from the "
        "top level): not applied; write it as <source>-><target>.transforms.tag.header"
    )
    flow_list = top_list + "A->B.transforms = drop\nA->B.transforms.drop.type = Filter\n"
    assert _steps(tmp_path, flow_list) == [{"filter": {"drop": "true"}}]
    assert any("A->B.transforms.tag.type: names no entry" in n for n in _notes(tmp_path, flow_list))


def test_top_level_only_options_are_a_missing_type_saying_where_mm2_reads_it(
    tmp_path: Path,
) -> None:
    text = f"transforms = m\ntransforms.m.type = {T}MaskField$Value\ntransforms.m.fields = ssn\n"
    assert _refusal(tmp_path, text) == (
        f"{tmp_path / 'mm2.properties'}: A->B.transforms.m.type: missing, expected a Connect "
        "transform class (MM2 ignores the top-level transforms.m.type: its connectors take "
        "transform options only as A->B.transforms.m.*)"
    )


def test_patterns_and_names_are_escaped_inside_cel_strings(tmp_path: Path) -> None:
    text = _chain(
        "transforms.f.type = Filter",
        "transforms.f.predicate = odd",
        "transforms.h.type = InsertHeader",
        "transforms.h.header = x",
        "transforms.h.value.literal = y",
        "transforms.h.predicate = quoted",
        "predicates.odd.type = TopicNameMatches",
        'predicates.odd.pattern = A\\\\.a"b\\\\\\\\c',  # regex A\.a"b\\c: a quote, a backslash
        "predicates.quoted.type = HasHeaderKey",
        'predicates.quoted.name = say "hi" \\\\ bye',  # the name: say "hi" \ bye
        transforms="f, h",
        predicates="odd, quoted",
    )
    filt, header = _steps(tmp_path, text)
    assert _truth(filt["filter"]["drop"], targetTopic='A.a"b\\c')
    assert not _truth(filt["filter"]["drop"], targetTopic='AXa"b\\c')
    when = header["insertHeader"]["when"]
    assert _truth(when, headers={'say "hi" \\ bye': "1"})
    assert not _truth(when, headers={'say "hi" bye': "1"})


def test_regex_k2k_cannot_evaluate_is_unsupported(tmp_path: Path) -> None:
    text = _chain(
        "transforms.f.type = Filter",
        "transforms.f.predicate = p",
        "predicates.p.type = TopicNameMatches",
        "predicates.p.pattern = (?!internal).*",
        transforms="f",
        predicates="p",
    )
    line = _refusal(tmp_path, text)
    assert "transform f (A->B.transforms.f.type = Filter): A->B.predicates.p.pattern: " in line
    assert "not valid in k2k's regex syntax" in line


def test_mm2_config_errors_are_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    cases = {
        _chain("transforms.f.type = Filter", "transforms.f.predicate = nope", transforms="f"): (
            "A->B.transforms.f.predicate: unknown predicate 'nope', expected one of none"
        ),
        _chain("transforms.f.type = Filter", "transforms.f.negate = true", transforms="f"): (
            "A->B.transforms.f.negate: given without a predicate to negate"
        ),
        _chain(f"transforms.m.type = {T}MaskField$Value", transforms="m"): (
            "A->B.transforms.m.fields: missing, expected a list of field names"
        ),
        _chain(
            f"transforms.r.type = {T}ReplaceField$Value", "transforms.r.renames = a", transforms="r"
        ): "A->B.transforms.r.renames: invalid rename 'a', expected old:new",
        _chain("transforms = a, a", "transforms.a.type = Filter"): (
            "A->B.transforms: transform 'a' listed twice, expected each name once"
        ),
    }
    for text, problem in cases.items():
        assert _refusal(tmp_path, text) == f"{path}: {problem}"


def test_options_k2k_does_not_read_are_noted(tmp_path: Path) -> None:
    text = _chain(
        f"transforms.m.type = {T}MaskField$Value",
        "transforms.m.fields = ssn",
        "transforms.m.replace.null.with.default = false",
        "transforms.m.feilds = typo",
        "predicates.unused.type = Whatever",
        transforms="m",
        predicates="unused",
    )
    notes = sorted(line.split(": flow A->B: ", 1)[1] for line in _notes(tmp_path, text))
    assert notes == [
        "A->B.predicates.unused.type: predicate unused is used by no transform of A->B: "
        "nothing to do",
        f"A->B.transforms.m.feilds: not an option of {T}MaskField$Value: ignored",
        "A->B.transforms.m.replace.null.with.default: only matters for records with Connect "
        "schemas; k2k's JSON keys and values have none: nothing to do",
    ]


UNKNOWN = _chain(
    "transforms.route.type = org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex = (.*)",
    "transforms.route.replacement = copy-$1",
    f"transforms.mask.type = {T}MaskField$Value",
    "transforms.mask.fields = ssn",
    transforms="route, mask",
)


@pytest.mark.parametrize("command", ["validate", "start"])
def test_unknown_transform_class_is_refused_in_one_line(tmp_path: Path, command: str) -> None:
    path = _write(tmp_path, UNKNOWN)
    done = subprocess.run([*K2K, command, "--mm2", str(path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {path}: transform route (A->B.transforms.route.type = "
        "org.apache.kafka.connect.transforms.RegexRouter): not a transform k2k maps: k2k cannot "
        "run these Connect transforms, and left out they would let records pass unchanged; "
        "supported: org.apache.kafka.connect.transforms.{Filter, InsertHeader, DropHeaders, "
        "MaskField$Key|$Value, ReplaceField$Key|$Value, InsertField$Key|$Value (static.field)} "
        "with org.apache.kafka.connect.transforms.predicates.{TopicNameMatches, HasHeaderKey, "
        "RecordIsTombstone}; expected only those, or --skip-unsupported-transforms to apply the "
        "supported ones and run without these\n"
    )


def test_skipped_transforms_are_noted_once_each_and_the_supported_ones_still_apply(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, UNKNOWN)
    mm2 = read_mm2(path, skip_transforms=True)
    assert all_notes(mm2) == [
        f"{path}: flow A->B: A->B.transforms.route.type: "
        "org.apache.kafka.connect.transforms.RegexRouter: not a transform k2k maps: NOT applied "
        "(--skip-unsupported-transforms): records pass it unchanged"
    ]
    done = subprocess.run(
        [*K2K, "validate", "--mm2", str(path), "--skip-unsupported-transforms"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("NOT applied") == 1
    printed = yaml.safe_load(done.stdout)
    assert printed["replication"][1] == {"transforms": [{"maskFields": {"fields": ["value.ssn"]}}]}


def test_transforms_of_a_flow_that_does_not_run_are_not_refused(tmp_path: Path) -> None:
    text = "B->A.transforms = route\nB->A.transforms.route.type = RegexRouter\n"
    assert _steps(tmp_path, text) == []


def test_mapped_pipeline_is_a_valid_k2k_pipeline(tmp_path: Path) -> None:
    text = _chain(
        "transforms.f.type = Filter",
        "transforms.f.predicate = test",
        "transforms.f.negate = true",
        "transforms.h.type = InsertHeader",
        "transforms.h.header = origin",
        "transforms.h.value.literal = A",
        "transforms.d.type = DropHeaders",
        "transforms.d.headers = x",
        "transforms.d.predicate = tomb",
        f"transforms.m.type = {T}MaskField$Value",
        "transforms.m.fields = ssn",
        "transforms.m.replacement = 0",
        f"transforms.r.type = {T}ReplaceField$Key",
        "transforms.r.include = id, t",
        "transforms.r.renames = t:type",
        f"transforms.i.type = {T}InsertField$Value",
        "transforms.i.static.field = dc",
        "transforms.i.static.value = eu",
        "predicates.test.type = TopicNameMatches",
        "predicates.test.pattern = .*\\\\.test",
        "predicates.tomb.type = RecordIsTombstone",
        transforms="f, h, d, m, r, i",
        predicates="test, tomb",
    )
    mm2 = read_mm2(_write(tmp_path, text))
    cfg = flow_config(mm2, mm2.flows[0])
    steps = [item.step for item in cfg.replication.transforms]
    assert [step.kind for step in steps] == [
        "filter",
        "insertHeader",
        "dropHeaders",
        "maskFields",
        "keepFields",
        "renameFields",
        "insertField",
    ]
    assert steps[0].drop == '!(targetTopic.matches("^(?:.*\\\\.test)$"))'
    assert steps[2].when == "value == null"
    assert all_notes(mm2) == []


def test_unknown_predicate_class_makes_its_transform_unsupported(tmp_path: Path) -> None:
    text = _chain(
        "transforms.f.type = Filter",
        "transforms.f.predicate = custom",
        "predicates.custom.type = com.example.IsInternal",
        transforms="f",
        predicates="custom",
    )
    line = _refusal(tmp_path, text)
    assert line.startswith(
        f"{tmp_path / 'mm2.properties'}: transform f (A->B.transforms.f.type = Filter): its "
        "predicate custom (com.example.IsInternal) is not one k2k maps: "
    )


def test_dotted_field_names_are_unsupported(tmp_path: Path) -> None:
    """Connect reads `a.b` as one field name; k2k's paths would read it as a nested field."""
    text = _chain(
        f"transforms.m.type = {T}MaskField$Value", "transforms.m.fields = a.b", transforms="m"
    )
    assert "A->B.transforms.m.fields: field name 'a.b' holds a '.'" in _refusal(tmp_path, text)
