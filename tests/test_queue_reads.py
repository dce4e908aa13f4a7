"""The review queue's plain reads (persistence.queue_reads) agree with the full models they stand in for."""

import pytest

from mgcp.models import FindingMark, FindingOption, FindingStatus, RemFinding

P = "/work/alpha"


def finding(finding_id: str, kind: str, data: dict) -> RemFinding:
    return RemFinding(id=finding_id, operation="knowledge_extraction", kind=kind, title="t", description="d",
                      options=[FindingOption(label="Skip", action="skip")], data=data,
                      fingerprint=finding_id, project_id=None, created_at=f"2026-01-01T00:00:0{finding_id[-1]}")


@pytest.mark.parametrize("known", [False, True])
def test_the_project_is_the_one_the_context_knows(db, run, known):
    async def work(s):
        if known:
            for n in range(3):
                await s.context.register_session(P, f"s{n}")
        return await s.queue.project(P), await s.context.ensure_project(P)  # read first, then stored
    ref, project = run(db, work)
    assert ref == (project.project_id, project.project_path, project.session_count)
    assert ref.session_count == (3 if known else 0)


def test_a_summary_drafts_nothing_and_its_data_is_not_read(db, run):
    draft = {"draft": {"trigger": "when x", "action": "do y"}}
    written = [finding("f1", "theme", draft), finding("f2", "summary", {**draft, "items": [draft] * 3})]

    async def work(s):
        async with s.transaction():
            for f in written:
                await s.rem.insert_finding(f)
        return await s.rem.marks(None, None), await s.rem.findings(None, None)
    marks, findings = run(db, work)
    assert marks == [FindingMark.of(f) for f in findings]
    assert [m.draft for m in marks] == [("when x", "do y"), None]


def test_whether_a_finding_speaks_is_whether_it_is_found_by_its_fingerprint(db, run):
    written = [finding(f"f{n}", "theme", {}).model_copy(update={"status": FindingStatus(status)})
               for n, status in enumerate(["pending", "rejected", "applied", "stale"])]
    written.append(finding("f4", "theme", {}).model_copy(update={"fingerprint": "f0"}))  # a second "f0", pending

    async def work(s):
        async with s.transaction():
            for f in written:
                await s.rem.insert_finding(f)
        names = ["f0", "f1", "f2", "f3", "f9"]
        return ([await s.rem.finding_speaks(n) for n in names],
                [await s.rem.finding_by_fingerprint(n) is not None for n in names])
    speaks, found = run(db, work)
    assert speaks == found == [True, True, False, False, False]
