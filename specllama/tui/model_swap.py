"""Switching models inside the chat (the model picker: m or F12): the picker's choice is fetched, checked and loaded in a
thread while the old models keep answering, then swapped in; the old ones are freed once no
answer is being generated with them.

Why this order: a load takes seconds (minutes with a download), so the chat stays usable meanwhile;
an answer streaming when the new models are ready finishes on the old ones (the engine holds their
contexts until it ends), and the swap happens right after it. A failed fetch, check or load leaves
the old models in place and says why. A hub model is fetched here without `--from-hub` because
choosing it in the picker is the explicit request that flag stands for.

Reopening a saved conversation held with other models starts the same switch (restore_models):
its settings apply at once, its models load while the current ones answer. Not when that would
download a model (a deleted cache, a hub model never fetched): gigabytes are fetched only when the
picker asks for them, so the notice points to the picker instead.

ModelSwitcher is the app's collaborator for this: everything it needs from the app is given to its
constructor (`build_runtime`, (LoadOptions, progress, status) -> runtime, is what tests replace
with a fake); the app forwards the Swap* messages its worker posts.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, replace
from threading import Event
from typing import Any, Callable

from textual.app import App

from specllama.errors import IncompatiblePairError, SpecllamaError
from specllama.models import store
from specllama.models.registry import Registry, load_registry
from specllama.tui.live_settings import LiveSettings
from specllama.tui.loading import LoadProgress, LoadStatus, Messages, Progress, RuntimeFailed, RuntimeReady, Status, load_runtime
from specllama.tui.model_choice import Choice, Precheck, precheck, source_of
from specllama.tui.widgets import LoadingPanel

RuntimeBuilder = Callable[[Any, Progress, Status], Any]  # (LoadOptions, progress, status) -> runtime


def real_runtime(opts, progress: Progress, status: Status):
    from specllama.runtime.loaded import open_runtime  # loads llama.cpp: only when a real runtime is wanted

    return open_runtime(opts, progress=progress, status=lambda notice: status(notice.text))


def options_for(current, choice: Choice):
    """The current load options (context size, threads, K auto...) with the chosen models."""
    if current is None:
        from specllama.runtime import LoadOptions

        current = LoadOptions()
    return replace(current, pair=None, target=choice.target, draft=choice.draft, load_draft=choice.draft is not None,
                   draft_if_pays=False)


def fetch_check_build(build: RuntimeBuilder, registry: Registry, choice: Choice, opts,
                      progress: Progress, status: Status):
    """Runs in the worker thread. Raises SpecllamaError for anything the user can act on."""
    for name in filter(None, (choice.target, choice.draft)):
        spec = registry.model(name)
        if not store.is_available(spec):
            status(f"fetching {name} ({source_of(spec)})…")
            store.ensure(spec, progress, allow_hub=True)
    check = precheck(registry, choice)  # now with every file on disk: the headers decide
    if not check.ok:
        raise IncompatiblePairError(check.text)
    status(f"loading {choice.label()}… (the current models answer meanwhile)")
    return build(opts, progress, status)


@dataclass
class SwapProgress(LoadProgress):
    pass


@dataclass
class SwapStatus(LoadStatus):
    pass


@dataclass
class SwapReady(RuntimeReady):
    pass


@dataclass
class SwapFailed(RuntimeFailed):
    pass


SWAP_MESSAGES = Messages(SwapProgress, SwapStatus, SwapReady, SwapFailed)


class ModelSwitcher:
    """Loads the models the picker (or a reopened conversation) asks for beside the ones in use,
    and hands them to `install` when no answer is being generated."""

    def __init__(self, app: App, *, build_runtime: RuntimeBuilder, load_options, registry: Registry | None,
                 settings: LiveSettings, runtime: Callable[[], Any], first_load_running: Callable[[], bool],
                 busy: Callable[[], bool], idle: Event, install: Callable[[Any], None], errors: list[str]):
        self._app = app
        self._build_runtime = build_runtime
        self.load_options = load_options  # the LoadOptions of the models in use (None: not told)
        self._registry = registry  # None: models.toml, read when first needed
        self._settings = settings
        self._runtime, self._first_load_running, self._busy = runtime, first_load_running, busy
        self._idle = idle  # set while no generation thread runs: the old models may be freed
        self._install = install
        self._errors = errors  # tracebacks of bugs, printed by `specllama chat` on exit
        self.loading: Choice | None = None  # being fetched, checked, loaded
        self.pending: Any = None  # loaded, waiting for the answer in progress to end

    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = load_registry()
        return self._registry

    def loaded_refs(self) -> tuple[str, str | None] | None:
        """The loaded models as the registry names them (target, draft or None), what a saved
        conversation keeps to be restored; None when the app was not told how it loaded them."""
        if self.load_options is None:
            return None
        from specllama.runtime import model_refs

        try:
            return model_refs(self.load_options, self.registry())
        except SpecllamaError:
            return None

    async def restore(self, target: str, draft: str | None) -> tuple[bool, str]:
        """Starts loading a reopened conversation's models if they can be had without a download.
        Returns (whether they are on their way, what the reopen notice should say about them)."""
        choice = Choice(target, draft)
        if self._first_load_running() or self.loading is not None or self.pending is not None:
            loading = self.loading
            if loading is not None and (loading.target, loading.draft) == (target, draft):
                return True, f"its models, {choice.label()}, are loading"
            return False, (f"held with {choice.label()}: the model picker (m / F12) loads it once the models "
                           "loading now are in")
        try:
            check = precheck(self.registry(), choice)
        except SpecllamaError as e:
            check = Precheck(False, str(e))
        if not check.ok:
            return False, f"held with {choice.label()}, which cannot be loaded: {check.text}"
        if check.to_fetch:
            return False, f"held with {choice.label()}, not cached: the model picker (m / F12) fetches and loads it"
        await self.switch(choice)
        return True, f"loading its models, {choice.label()}; the current ones answer meanwhile"

    def open_picker(self) -> None:
        from specllama.tui.screens import ModelPickerScreen

        app = self._app
        if isinstance(app.screen, ModelPickerScreen):
            return
        try:
            registry = self.registry()
        except SpecllamaError as e:
            app.notify(str(e), title="cannot read the model registry", severity="error", timeout=15)
            return
        current = self._runtime()
        app.push_screen(ModelPickerScreen(registry, current_target=getattr(current, "target_name", None),
                                          current_draft=getattr(current, "draft_name", None)), self.switch)

    async def switch(self, choice: Choice | None) -> None:
        if choice is None:
            return
        if self.loading is not None or self.pending is not None:
            self._app.notify("still loading the models chosen before", severity="warning")
            return
        self.loading = choice
        opts = options_for(self.load_options, choice)
        # Mounted before the worker starts, so its progress messages always find it.
        await self._app.query_one("#chat").mount(LoadingPanel(f"loading {choice.label()}…", id="swap-panel"),
                                                 before="#prompt")
        registry, build, post = self.registry(), self._build_runtime, self._app.post_message
        self._app.run_worker(
            lambda: load_runtime(lambda progress, status: fetch_check_build(build, registry, choice, opts,
                                                                            progress, status),
                                 post, messages=SWAP_MESSAGES),
            thread=True, exit_on_error=False, group="swap")

    def progress(self, message: SwapProgress) -> None:
        for panel in self._app.query("#swap-panel"):
            panel.show_progress(message.done, message.total, message.what)

    def status(self, message: SwapStatus) -> None:
        for panel in self._app.query("#swap-panel"):
            panel.show_loading(message.text)

    def failed(self, message: SwapFailed) -> None:
        if message.trace:
            self._errors.append(message.trace)
        choice, self.loading = self.loading, None
        self._settings.wait_for_drafter(None)  # waited for the models that failed: the drafter in use stays
        self._app.query("#swap-panel").remove()
        runtime = self._runtime()
        still = f"; still using {runtime.target_name}" if runtime is not None else ""
        self._app.notify(f"{message.reason}{still}", title=f"could not load {choice.label() if choice else 'the models'}",
                         severity="error", timeout=20)

    def ready(self, message: SwapReady) -> None:
        self.pending = message.runtime
        if self._busy():
            self._app.notify("new models ready: they take over when this answer ends")
        else:
            self.install_pending()

    def install_pending(self) -> None:
        """The new runtime takes over; the old one is closed once no generation uses it."""
        new, self.pending = self.pending, None
        if new is None or self._busy():
            self.pending = new
            return
        choice, self.loading = self.loading, None
        old = self._runtime()
        self._app.query("#swap-panel").remove()
        self.load_options = options_for(self.load_options, choice) if choice else self.load_options
        self._install(new)
        if old is not None:
            # `busy` is cleared when the answer's last message arrives; the thread that sent it may
            # still be leaving: wait for it before llama.cpp frees what it decoded with.
            if not self._idle.wait(30):
                self._errors.append("the old models were not freed: a generation did not end\n")
                return
            try:
                old.close()
            except Exception:  # a bug in freeing must not end the chat: kept, printed by `specllama chat` on exit
                self._errors.append(traceback.format_exc())
        self._app.notify(f"now using {new.target_name}" + (f" ← {new.draft_name}" if new.draft_name else ""))

    def close_pending(self) -> None:
        """At exit: a runtime loaded but never swapped in is freed too."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.close()
