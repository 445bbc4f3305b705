# nbgrader's settings for this course (README, "For instructors"): run nbgrader in this folder, with the venv activated.
from gpucourse.grading import autograde_preprocessors, autograde_sanitize_preprocessors, generate_assignment_preprocessors

c = get_config()  # noqa: F821 (nbgrader defines get_config)
c.CourseDirectory.course_id = "gpucourse"
# Released stubs keep each exercise's hint, exactly as exercises/ shows them.
c.GenerateAssignment.preprocessors = generate_assignment_preprocessors()
# Before autograde runs a submission: every cell but the locked set-up and check cells is screened (gpucourse.checks.guard);
# a cell that could change the checks is replaced by one that raises, so its exercise scores 0.
c.Autograde.sanitize_preprocessors = autograde_sanitize_preprocessors()
# Each check's verdict is computed again in a fresh process where no answer ever ran (gpucourse.checks.remote), from a
# transcript of the answer's calls written while the notebook ran; that verdict, not the notebook's own output, is scored.
c.Autograde.autograde_preprocessors = autograde_preprocessors()
# A cell may run as long as a check's own limit on a GPU (guard.CHECK_SECONDS, 600 s) and a little more: the check's own deadline
# names what was running; nbgrader's (30 s by default) would cut a GPU check short with no word.
c.Execute.timeout = 660
