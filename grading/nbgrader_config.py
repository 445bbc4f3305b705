# nbgrader's settings for this course (README, "For instructors"): run nbgrader in this folder, with the venv activated.
from gpucourse.grading import generate_assignment_preprocessors

c = get_config()  # noqa: F821 (nbgrader defines get_config)
c.CourseDirectory.course_id = "gpucourse"
# Released stubs keep each exercise's hint, exactly as exercises/ shows them.
c.GenerateAssignment.preprocessors = generate_assignment_preprocessors()
