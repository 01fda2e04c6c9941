"""What a message asks for, read in words before any plan is scored (``matching.request_text``): a report of work
done, venting, work planned for later or left to the user, and a question after a sentence that only sets the
scene ask for no work now; an order or a report of trouble beside any of them still does.  The messages here
are not in the labelled set."""

import pytest

from graph_engine.authoring.library import load_library_file
from graph_engine.matching.decide import best_match
from graph_engine.matching.words import asks_no_work, normalise, request_text
from graph_engine.tools.standin import LIBRARY

PLANS = list(load_library_file(str(LIBRARY)).plans.values())


@pytest.mark.parametrize("message", [
    # reported done, or thanks for help already given
    "the migration to the new NAS is done, all files are there",
    "Merged the release branch this morning, nothing left to do",
    "the flaky test is gone since the last commit, thanks for your help",
    "the import error is fixed now, the build works again",
    # venting
    "ugh, docker again",
    "I hate refactoring other people's code",
    "I'm so tired of rebasing every morning",
    # planned for later, by the user or someone else
    "we might containerize the reporting service eventually",
    "once Priya is back she'll merge the hotfix",
    "we'll go over the 503 logs at next week's retro",
    "if the timeout comes back I'll send you the logs",
    # a report in the past tense, an issue number that is no status code, an order not to do it yet
    "rebased the hotfix branch this morning and pushed it, fyi",
    "we rolled out #512 yesterday, all smooth",
    "don't deploy anything to prod until the audit is over",
    "we might move the wiki to a new server in Q4, not now",
    # the user will do the work
    "give me the steps to make a feature branch and push it, I'll type them myself",
    # a question after a sentence that only sets the scene
    "our team is opening a new branch in Madrid, any ideas for a launch party?",
    "the image is 1.4GB now. what are the usual ways to make images smaller?",
    # a colleague's work reported by name; "still passing" and "but it works" are no open trouble
    "priya rebased the payments branch this morning",
    "Done moving the reports to the archive share, the nightly job still works",
    "imo the queue consumer doesnt need a rewrite, slow but it works",
    # a noun made from an order is no order ("migration", "deployment")
    "status: the deployment of the new dashboard is done, smoke tests green",
    # a question without its apostrophe; an email to write
    "whats a reverse proxy and do i need one for docker",
    "write an email to the team about the merge freeze on friday",
])
def test_a_message_that_asks_for_no_work_now_starts_nothing(message):
    assert request_text(normalise(message)) == ""
    for domain in ("", "git_ops", "docker_ops", "log_analysis", "refactor", None):
        assert best_match(PLANS, message, domain, None) is None, (message, domain)


@pytest.mark.parametrize("message, plan", [
    # an order or trouble beside the same words still asks for the work
    ("the backup is done but half the files are missing, restore them from /mnt/old", "file_backup_restore"),
    ("I already pushed the branch, now merge it into main", "git_merge_pr"),
    ("ugh, the build fails again with a segfault, fix it", "bugfix_workflow"),
    ("the crash was fixed in 2.1 but it is back in 2.2, fix the bug please", "bugfix_workflow"),
    ("can you add a webhook handler for Stripe payments? don't commit the secret", "api_integration"),
    ("merge conflicts in main after the release, resolve them and merge the branch", "git_merge_pr"),
    ("deleted the wrong folder by accident, bring it back from last night's backup", "file_backup_restore"),
    ("upgraded node last week, now update the npm dependencies and run the tests", "dependency_update"),
    ("priya rebased the payments branch but it has conflicts now, merge main into it", "git_merge_pr"),
    ("the tests are still failing after the refactor, fix the bug in parser.py", "bugfix_workflow"),
    # a version or a file name is one word, not two sentences
    ("why does my script crash with IndexError on line 9 of utils/split.py? fix the bug", "bugfix_workflow"),
])
def test_an_order_or_trouble_beside_those_words_still_starts_the_plan(message, plan):
    assert not asks_no_work(normalise(message))
    m = best_match(PLANS, message, "", None)
    assert m is not None and m.plan.id == plan, (message, m and m.plan.id)


def test_a_phrase_inside_a_branch_name_or_a_path_is_not_the_users_word():
    m = best_match(PLANS, "bring branch 'refactor/auth-cleanup' into main and push", "refactor", None)
    assert m is not None and m.plan.id == "git_merge_pr" and "refactor" not in m.hits


def test_a_dot_inside_a_word_does_not_end_a_sentence():
    assert request_text(normalise("what is 1.2GB in bytes? the image build in api/build.py fails, fix it")) == \
        "the image build in api/build.py fails, fix it"
    assert request_text(normalise("what is a dockerfile? the build of https://x.io/app.py fails, fix it")) == \
        "the build of https://x.io/app.py fails, fix it"
