# nbgrader configuration of the book's course. Run every nbgrader command from this folder (`cd labs`).
# The course root is this file's own folder, so a copy of labs/ (the tests grade in a temporary copy)
# is a complete course of its own: source/, release/, submitted/, autograded/, feedback/, gradebook.db.
import os

c = get_config()  # noqa: F821  (traitlets injects get_config when it loads this file)

c.CourseDirectory.course_id = "ptlabs-book"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))

# Let a test cell run long enough on a slow 2-core laptop; every lab finishes in seconds.
c.ExecutePreprocessor.timeout = 120
