"""User-facing errors.

Every mistake a user can make (a missing model, a corrupt file, a bad pair, a prompt that does not
fit) raises a subclass of SpecllamaError with a message that stands alone on one line. The CLI
prints that line and exits 1 (2 for a UsageError); nothing else is caught, so real bugs still show a traceback.
"""


class SpecllamaError(Exception):
    """A problem the user can fix; str(error) is the one line the CLI prints (exit status 1)."""


class ConfigError(SpecllamaError):
    """models.toml (shipped or user) is malformed or names something unknown."""


class ModelFileError(SpecllamaError):
    """A model file is missing, not GGUF, truncated, or fails its checksum."""


class IncompatiblePairError(SpecllamaError):
    """The draft cannot speculate for the target (different vocabularies)."""


class ContextOverflowError(SpecllamaError):
    """The prompt (or prompt plus generation) does not fit in the context window. The numbers, when
    given, let a front end say it in its own words (a server's 400 in Anthropic's phrasing)."""

    def __init__(self, message: str, prompt_tokens: int | None = None, n_ctx: int | None = None):
        super().__init__(message)
        self.prompt_tokens, self.n_ctx = prompt_tokens, n_ctx


class DownloadError(SpecllamaError):
    """Fetching model parts from the package registry or a hub failed."""


class UsageError(SpecllamaError):
    """The command line itself is wrong (conflicting options, no prompt): exit status 2, like
    argparse's own errors; every other SpecllamaError is a failure, exit status 1."""


class Stopped(Exception):
    """Tokenizing was abandoned: its `stop()` said the result is no longer wanted (the client left,
    the server is stopping). Not a SpecllamaError: nobody made a mistake."""
