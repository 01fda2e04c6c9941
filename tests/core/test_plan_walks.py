"""Each bundled plan walked through Agent-Zero passes: its success path and every failure route.

The scripted model answers each step with a realistic output from fixtures/check_outputs.json
(a passing one, or a failing one while the walk says that node must fail), so these walks use
the plans' real checks and the same code path as Agent-Zero.
"""

import pytest
from scenario import FixtureModel, message_for

from graph_engine.tools.standin import Session


def walk(plan: str, failures: dict[str, int]) -> tuple[list[tuple[str, str]], dict]:
    """Run the plan; node N fails its first failures[N] visits' checks. Returns (verdicts, final event)."""
    message = message_for(plan)
    s = Session()
    s.user(message)
    model = FixtureModel(plan, failures)
    s.run_pass(model)  # a decisive message shows the plan in this very call
    assert s.state and s.state["plan_id"] == plan, message
    for _ in range(80):
        if s.state is None or s.state["status"] != "active":
            break
        if not s.monologue_open:  # a response ended the monologue: it is judged when the user writes again
            s.user("thanks")
        s.run_pass(model)
    final = s.agent._htn_last_run
    verdicts = [(e["node"], e["outcome"]) for e in final["events"] if e["type"] == "node_verified"]
    return verdicts, final["events"][-1]


# (plan, {node: failures}, expected end: exit or escalate node id)
WALKS = [
    ("bugfix_workflow", {}, "done"),
    ("bugfix_workflow", {"reproduce": 1}, "done"),  # not reproduced once: gather context, then reproduced
    ("bugfix_workflow", {"reproduce": 3}, "escalate_no_repro"),
    ("bugfix_workflow", {"gather_context": 1, "reproduce": 1}, "escalate_no_repro"),
    ("bugfix_workflow", {"isolate": 1}, "done"),  # decision: back for context once
    ("bugfix_workflow", {"isolate": 2}, "escalate_no_cause"),
    ("bugfix_workflow", {"fix": 3}, "escalate_stuck"),
    ("bugfix_workflow", {"test": 2}, "done"),
    ("bugfix_workflow", {"test": 3}, "escalate_stuck"),
    ("bugfix_workflow", {"verify_no_regression": 2}, "escalate_stuck"),
    ("git_feature_branch", {}, "done"),
    ("git_feature_branch", {"check_status": 1}, "done"),  # dirty once: stash, then clean
    ("git_feature_branch", {"check_status": 3}, "escalate_dirty"),
    ("git_feature_branch", {"check_status": 1, "stash_or_commit": 2}, "escalate_dirty"),
    ("git_feature_branch", {"create_branch": 1}, "escalate_branch"),
    ("git_feature_branch", {"make_changes": 3}, "escalate_changes"),
    ("git_feature_branch", {"commit": 2}, "escalate_changes"),
    ("git_feature_branch", {"push": 2}, "escalate_push"),
    ("git_merge_pr", {}, "done"),
    ("git_merge_pr", {"fetch": 2}, "escalate_remote"),
    ("git_merge_pr", {"checkout_target": 2}, "escalate_checkout"),
    ("git_merge_pr", {"merge": 1}, "done"),  # conflicts resolved
    ("git_merge_pr", {"merge": 1, "resolve_conflicts": 3}, "escalate_conflicts"),
    ("git_merge_pr", {"merge": 1, "resolve_conflicts": 3, "abort_merge": 1}, "escalate_abort_failed"),
    ("git_merge_pr", {"push": 2}, "escalate_push"),
    ("docker_build_deploy", {}, "done"),
    ("docker_build_deploy", {"check_dockerfile": 2}, "done"),  # no Dockerfile: write one, build
    ("docker_build_deploy", {"check_dockerfile": 2, "fix_dockerfile": 3}, "escalate_build"),
    ("docker_build_deploy", {"build": 2}, "done"),
    ("docker_build_deploy", {"build": 3}, "escalate_build"),
    ("docker_build_deploy", {"test_image": 2}, "done"),
    ("docker_build_deploy", {"test_image": 3}, "escalate_image"),
    ("docker_build_deploy", {"test_image": 1, "fix_image": 2}, "escalate_image"),
    ("docker_build_deploy", {"deploy": 2}, "escalate_deploy"),
    ("docker_build_deploy", {"verify_running": 3}, "escalate_deploy"),
    ("file_backup_restore", {}, "done"),
    ("file_backup_restore", {"inventory": 2}, "escalate_source"),
    ("file_backup_restore", {"create_backup": 2}, "escalate_no_backup"),
    ("file_backup_restore", {"execute": 2}, "escalate_restored"),
    ("file_backup_restore", {"execute": 2, "restore_from_backup": 1}, "escalate_restore_failed"),
    ("file_backup_restore", {"verify_destination": 1}, "done"),
    ("file_backup_restore", {"verify_destination": 2}, "escalate_restored"),
    ("file_backup_restore", {"cleanup": 1}, "done"),  # continue_on_fail
    ("api_integration", {}, "done"),
    ("api_integration", {"research": 2}, "escalate_docs"),
    ("api_integration", {"setup_auth": 2}, "escalate_auth"),
    ("api_integration", {"implement": 2}, "escalate_api"),
    ("api_integration", {"test_call": 2}, "done"),
    ("api_integration", {"test_call": 3}, "escalate_api"),
    ("api_integration", {"test_call": 1, "fix_call": 2}, "escalate_api"),
    ("api_integration", {"error_handling": 2}, "escalate_api"),
    ("codegen_module", {}, "done"),
    ("codegen_module", {"spec_review": 2}, "escalate_spec"),
    ("codegen_module", {"scaffold": 2}, "escalate_stuck"),
    ("codegen_module", {"implement": 2}, "escalate_stuck"),
    ("codegen_module", {"test": 2}, "done"),
    ("codegen_module", {"test": 3}, "escalate_stuck"),
    ("codegen_module", {"test": 1, "fix_implementation": 2}, "escalate_stuck"),
    ("codegen_module", {"document": 1}, "done"),  # continue_on_fail
    ("refactor_safe", {}, "done"),
    ("refactor_safe", {"run_baseline_tests": 2}, "escalate_no_baseline"),
    ("refactor_safe", {"extract_changes": 2}, "escalate_plan"),
    ("refactor_safe", {"modify": 2}, "escalate_reverted"),
    ("refactor_safe", {"run_tests_again": 1}, "done"),
    ("refactor_safe", {"run_tests_again": 2}, "escalate_reverted"),
    ("refactor_safe", {"run_tests_again": 2, "revert": 1}, "escalate_revert_failed"),
    ("refactor_safe", {"commit": 2}, "escalate_commit"),
    ("dependency_update", {}, "done"),
    ("dependency_update", {"audit": 2}, "escalate_audit"),
    ("dependency_update", {"backup_lockfile": 1}, "escalate_no_backup"),
    ("dependency_update", {"update": 2}, "escalate_update_failed"),
    ("dependency_update", {"update": 2, "restore_lockfile": 1}, "escalate_broken"),
    ("dependency_update", {"run_tests": 1}, "done"),
    ("dependency_update", {"run_tests": 2}, "escalate_update_failed"),
    ("dependency_update", {"run_tests": 1, "pin_back": 2}, "escalate_update_failed"),
    ("dependency_update", {"commit": 2}, "escalate_commit"),
    ("log_investigation", {}, "done"),
    ("log_investigation", {"locate_logs": 2}, "escalate_no_logs"),
    ("log_investigation", {"filter_entries": 2}, "done"),  # nothing found: straight to the report
    ("log_investigation", {"identify_pattern": 2}, "done"),
    ("log_investigation", {"trace_root_cause": 1}, "done"),  # continue_on_fail
]


@pytest.mark.parametrize("plan, failures, end", WALKS,
                         ids=[f"{p}-{'+'.join(f'{k}x{v}' for k, v in f.items()) or 'success'}" for p, f, _ in WALKS])
def test_walk(plan, failures, end):
    verdicts, last = walk(plan, failures)
    assert last["node"] == end, verdicts
    assert last["type"] == ("plan_completed" if end == "done" else "plan_escalated")
    for node, count in failures.items():  # every scripted failure was judged as one
        assert sum(1 for v in verdicts if v == (node, "fail")) == count, (node, verdicts)


def test_every_plan_has_walks_for_each_escalation():
    from graph_engine.authoring.library import load_library_file
    from graph_engine.tools.standin import LIBRARY
    ends = {(p, e) for p, _, e in WALKS}
    missing = [(pid, nid) for pid, plan in load_library_file(str(LIBRARY)).plans.items()
               for nid, node in plan.nodes.items() if node.type in ("exit", "escalate") and (pid, nid) not in ends]
    assert missing == []


def test_success_walk_follows_the_success_path():
    from graph_engine.authoring.library import load_library_file
    from graph_engine.tools.standin import LIBRARY
    for pid, plan in load_library_file(str(LIBRARY)).plans.items():
        verdicts, _ = walk(pid, {})
        assert [n for n, _ in verdicts] == list(plan.success_path), pid
