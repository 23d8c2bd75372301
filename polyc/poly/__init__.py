"""The polyhedral view: isl domains, accesses, schedules, inference, checks and dependences."""
from .checks import check_bounds, empty_size_requirements, check_initialized
from .dependences import Dependence, Dependences
from .model import compute_dependences
from .inference import infer_shapes
from .model import PolyModel
