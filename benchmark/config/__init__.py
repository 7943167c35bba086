"""What a run is: one typed dataclass per ``[section]`` of its TOML, parsing with clear errors,
``section.key=value`` overrides, the stable run id, and the method registry that types the
``[method]`` section. Pure Python (no torch), so that the command line answers at once.

May import: core.
"""

from benchmark.config.method_registry import get_method, load_methods, register_method
from benchmark.config.parse import (
    DEFAULT_CONFIG,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    config_to_toml,
    parse_override,
    replace_section,
)
from benchmark.config.run import RunConfig, run_id

__all__ = [
    "DEFAULT_CONFIG",
    "RunConfig",
    "apply_overrides",
    "config_from_dict",
    "config_to_dict",
    "config_to_toml",
    "get_method",
    "load_methods",
    "parse_override",
    "register_method",
    "replace_section",
    "run_id",
]
