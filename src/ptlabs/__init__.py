"""ptlabs: the small helper package of the PyTorch core-API book.

It holds infrastructure (device choice, seeding, printing, timing, exercise checks) and
nothing the book is teaching: notebooks call ``torch`` directly for every lesson.
"""

from importlib.metadata import version

from .checks import ExerciseError, check_close, check_equal, check_function, check_tensor, verdict
from .data import NumpyNoise, SlowSquares
from .device import seed_everything
from .errors import expect_error
from .environment import environment_report, format_report
from .plotting import plot_comparison, use_book_style
from .printing import set_print_options
from .states import show_states
from .session import setup
from .timing import Comparison, compare, machine_check, measure

__version__ = version("ptlabs")  # one source of truth: pyproject.toml

__all__ = [
    "ExerciseError",
    "NumpyNoise",
    "SlowSquares",
    "Comparison",
    "check_close",
    "check_equal",
    "check_function",
    "check_tensor",
    "compare",
    "environment_report",
    "expect_error",
    "format_report",
    "machine_check",
    "measure",
    "plot_comparison",
    "seed_everything",
    "set_print_options",
    "setup",
    "show_states",
    "use_book_style",
    "verdict",
]
