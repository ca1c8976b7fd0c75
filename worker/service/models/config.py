"""The settings of the models a group learns: the served model's name, its challengers, promotion.

A challenger is given as ``NAME=SPEC`` (``--challenger cnb=model=complement,alpha=0.5``): SPEC is
a comma list of model settings named as the serve options are (``worker/model_settings.py``);
one that names no kind is of the kind --model gives. Every model learns the same labeled
messages, with the same features; the rules between a challenger and the other settings (its
kind and the features, the output format) are checked by ``ServeConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...config import ModelOptions
from ...errors import ConfigError
from ...model_names import DEFAULT_NAME, NAME_RULE, is_model_name
from ...model_settings import parse_model_spec
from ...setting import Checked, setting

MOST_CHALLENGERS = 8
PROMOTE = ("never", "auto")


@dataclass(frozen=True)
class Challenger:
    """name : its name; model : its kind (None: the served model's) and parameters; spec : as given."""
    name: str
    model: ModelOptions
    spec: str


def check_name(name: str, option: str) -> str:
    """A model's name (``names.py``), or a ConfigError naming ``option``."""
    if not is_model_name(name):
        raise ConfigError(f"{option}: a model's name is {NAME_RULE}; got {name!r}.")
    return name


def parse_challenger(text: str) -> Challenger:
    """``NAME=SPEC`` as --challenger takes it (ConfigError, one line, for anything else)."""
    name, equals, spec = text.partition("=")
    if not equals or not spec.strip():
        raise ConfigError(f"--challenger takes NAME=SPEC, such as cnb=model=complement,alpha=0.5; got {text!r}.")
    name = check_name(name.strip(), "--challenger")
    return Challenger(name, parse_model_spec(spec, f"--challenger {name}"), spec.strip())


def parse_challengers(texts: list[str]) -> tuple[Challenger, ...]:
    return tuple(parse_challenger(text) for text in texts)


@dataclass(frozen=True)
class ModelsConfig(Checked):
    """The served model's name, the challengers that learn beside it, and when one takes its place."""
    model_name: str | None = setting(None, "--model-name",
                                     help="The name of the model the serve options describe (default: main), in "
                                          "predictions, metrics and the group's state.")
    challengers: tuple[Challenger, ...] = setting(
        default_factory=tuple, flag="--challenger", many=True, parse=parse_challengers,
        help="NAME=SPEC: a model that learns the same labeled messages beside the served one and is judged "
             "test-then-train on every message as it is (repeatable, 8 at most). SPEC: model settings as KEY=VALUE, "
             "comma-separated, named as the options: model=complement,alpha=0.5 or half_life=10000 (the kind is "
             "--model's unless given).")
    output_challengers: bool = setting(False, "--output-challengers",
                                       help="Shadow mode: each prediction also carries every challenger's prediction "
                                            "and probabilities, under \"challengers\".")
    promote: str = setting("never", "--promote", choices=PROMOTE,
                           help="never, or auto: a challenger whose log-loss over the last --promote-window examples "
                                "judged is lower than the served model's by --promote-margin becomes the served "
                                "model (kept in the group's state; the former one stays on as a challenger).")
    promote_window: int = setting(10_000, "--promote-window", low=100, high=1_000_000,
                                  help="Examples judged by both models that a promotion compares.")
    promote_margin: float = setting(0.05, "--promote-margin", low=0, high=0.99,
                                    help="How much lower, relatively, a challenger's log-loss must be (0.05: 5% "
                                         "lower).")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_name(self.name, "--model-name")
        names = [self.name] + [challenger.name for challenger in self.challengers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ConfigError(f"the model name {twice[0]!r} is given twice; give each model a name of its own.")
        if len(self.challengers) > MOST_CHALLENGERS:
            raise ConfigError(f"--challenger is given {len(self.challengers)} times; {MOST_CHALLENGERS} at most: each "
                              "costs its own statistics and a prediction of every message.")
        if not self.challengers:
            for option, given in (("--output-challengers", self.output_challengers),
                                  ("--promote auto", self.promote == "auto")):
                if given:
                    raise ConfigError(f"{option} needs a --challenger.")

    @property
    def name(self) -> str:
        """The served model's name (the one the serve options describe)."""
        return self.model_name or DEFAULT_NAME

    @property
    def named(self) -> bool:
        """Whether predictions name the model that served them: --model-name or a challenger given
        (without either, they are what they were before models had names)."""
        return self.model_name is not None or bool(self.challengers)

    def challenger_models(self, served_kind: str) -> dict[str, ModelOptions]:
        """Each challenger's model by name, of ``served_kind`` where its SPEC names none."""
        return {challenger.name: challenger.model if challenger.model.kind is not None
                else challenger.model.of_kind(served_kind) for challenger in self.challengers}
