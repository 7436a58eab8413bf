"""JUnit XML for CI test reports: a test case per gate rule and per graph-break site."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from compilediag.render import rule_text
from compilediag.report.model import Report

BREAK_RULES = ("fullgraph", "max-graph-breaks")


def render_junit(report: Report) -> str:
    target = report.target.path or "model"
    suite = ET.Element("testsuite", name=f"compilediag {target}")
    failures = 0
    for rule in report.verdict.rules:
        case = ET.SubElement(suite, "testcase", classname="compilediag.rules", name=rule.name)
        if not rule.passed:
            failures += 1
            ET.SubElement(case, "failure", message=f"{rule.name}: {rule_text(rule)}")
    breaks_forbidden = any(r.name in BREAK_RULES and not r.passed for r in report.verdict.rules)
    new_sites = {(s.file, s.line) for s in report.verdict.new_sites}
    for b in report.graph_breaks:
        where = f"{b.file}:{b.line}"
        case = ET.SubElement(
            suite,
            "testcase",
            classname="compilediag.graph_breaks",
            name=where,
            file=b.file,
            line=str(b.line),
        )
        if breaks_forbidden or (b.file, b.line) in new_sites:
            failures += 1
            failure = ET.SubElement(case, "failure", message=f"graph break at {where}: {b.reason}")
            failure.text = f"{b.code}\n{b.explanation}\nfix: {b.suggestion}"
        else:
            ET.SubElement(case, "system-out").text = f"{b.reason}: {b.code}"
    for f in report.compile_failures:
        failures += 1
        place = f"{f.file}:{f.line}"
        case = ET.SubElement(
            suite, "testcase", classname="compilediag.compile_failures", name=place,
            file=f.file, line=str(f.line),
        )  # fmt: skip
        failure = ET.SubElement(case, "failure", message=f"{f.by} failed at {place}: {f.reason}")
        failure.text = f"{f.code}\n{f.fail_type}: {f.reason}\nfix: {f.fix}"
    for err in report.errors:
        failures += 1
        case = ET.SubElement(
            suite, "testcase", classname="compilediag.errors", name="torch.compile"
        )
        ET.SubElement(case, "error", message=err.text)
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
