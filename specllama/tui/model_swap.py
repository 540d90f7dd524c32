"""Switching models inside the chat (F12): the picker's choice is fetched, checked and loaded in a
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
picker asks for them, so the notice says F12 instead.

ChatApp mixes this in; it keeps app.py to the chat itself. The app supplies `_build_runtime`
(LoadOptions, progress, status) -> runtime, which tests replace with a fake.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, replace
from typing import Any, Callable

from textual import work

from specllama.errors import IncompatiblePairError, SpecllamaError
from specllama.models import store
from specllama.models.registry import Registry, load_registry
from specllama.tui.loading import LoadProgress, LoadStatus, Messages, Progress, RuntimeFailed, RuntimeReady, Status, load_runtime
from specllama.tui.model_choice import Choice, Precheck, precheck, source_of
from specllama.tui.widgets import LoadingPanel

RuntimeBuilder = Callable[[Any, Progress, Status], Any]  # (LoadOptions, progress, status) -> runtime


def real_runtime(opts, progress: Progress, status: Status):
    from specllama.runtime import Runtime  # loads llama.cpp: only when a real runtime is wanted

    return Runtime(opts, progress=progress, status=status)


def options_for(current, choice: Choice):
    """The current load options (context size, threads, K auto...) with the chosen models."""
    if current is None:
        from specllama.runtime import LoadOptions

        current = LoadOptions()
    return replace(current, pair=None, target=choice.target, draft=choice.draft, load_draft=choice.draft is not None)


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


class ModelSwitching:
    """The app's side of a switch. Needs from the app: runtime, busy, _idle, load_options, load_failed,
    _build_runtime, _wanted_drafter, unexpected_errors and _use_runtime(runtime)."""

    _swap_choice: Choice | None = None  # being loaded
    _swap_pending: Any = None  # loaded, waiting for the answer in progress to end
    _model_registry: Registry | None = None

    def registry(self) -> Registry:
        if self._model_registry is None:
            self._model_registry = load_registry()
        return self._model_registry

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

    async def restore_models(self, target: str, draft: str | None) -> tuple[bool, str]:
        """Starts loading a reopened conversation's models if they can be had without a download.
        Returns (whether they are on their way, what the reopen notice should say about them)."""
        choice = Choice(target, draft)
        first_load_running = self.runtime is None and self.load_failed is None
        if first_load_running or self._swap_choice is not None or self._swap_pending is not None:
            loading = self._swap_choice
            if loading is not None and (loading.target, loading.draft) == (target, draft):
                return True, f"its models, {choice.label()}, are loading"
            return False, f"held with {choice.label()}: F12 loads it once the models loading now are in"
        try:
            check = precheck(self.registry(), choice)
        except SpecllamaError as e:
            check = Precheck(False, str(e))
        if not check.ok:
            return False, f"held with {choice.label()}, which cannot be loaded: {check.text}"
        if check.to_fetch:
            return False, f"held with {choice.label()}, not cached: F12 fetches and loads it"
        await self.switch_models(choice)
        return True, f"loading its models, {choice.label()}; the current ones answer meanwhile"

    def action_models(self) -> None:
        from specllama.tui.screens import ModelPickerScreen

        if isinstance(self.screen, ModelPickerScreen):
            return
        try:
            registry = self.registry()
        except SpecllamaError as e:
            self.notify(str(e), title="cannot read the model registry", severity="error", timeout=15)
            return
        current = self.runtime
        self.push_screen(ModelPickerScreen(registry, current_target=getattr(current, "target_name", None),
                                           current_draft=getattr(current, "draft_name", None)), self.switch_models)

    async def switch_models(self, choice: Choice | None) -> None:
        if choice is None:
            return
        if self._swap_choice is not None or self._swap_pending is not None:
            self.notify("still loading the models chosen before", severity="warning")
            return
        self._swap_choice = choice
        opts = options_for(self.load_options, choice)
        # Mounted before the worker starts, so its progress messages always find it.
        await self.query_one("#chat").mount(LoadingPanel(f"loading {choice.label()}…", id="swap-panel"), before="#prompt")
        self._swap(choice, opts)

    @work(thread=True, exit_on_error=False, group="swap")
    def _swap(self, choice: Choice, opts) -> None:
        registry = self.registry()
        load_runtime(lambda progress, status: fetch_check_build(self._build_runtime, registry, choice, opts,
                                                                progress, status),
                     self.post_message, messages=SWAP_MESSAGES)

    def on_swap_progress(self, message: SwapProgress) -> None:
        for panel in self.query("#swap-panel"):
            panel.show_progress(message.done, message.total, message.what)

    def on_swap_status(self, message: SwapStatus) -> None:
        for panel in self.query("#swap-panel"):
            panel.show_loading(message.text)

    def on_swap_failed(self, message: SwapFailed) -> None:
        if message.trace:
            self.unexpected_errors.append(message.trace)
        choice, self._swap_choice = self._swap_choice, None
        self._wanted_drafter = None  # waited for the models that failed: the drafter in use stays
        self.query("#swap-panel").remove()
        still = f"; still using {self.runtime.target_name}" if self.runtime is not None else ""
        self.notify(f"{message.reason}{still}", title=f"could not load {choice.label() if choice else 'the models'}",
                    severity="error", timeout=20)

    def on_swap_ready(self, message: SwapReady) -> None:
        self._swap_pending = message.runtime
        if self.busy:
            self.notify("new models ready: they take over when this answer ends")
        else:
            self.install_pending_runtime()

    def install_pending_runtime(self) -> None:
        """The new runtime takes over; the old one is closed once no generation uses it."""
        new, self._swap_pending = self._swap_pending, None
        if new is None or self.busy:
            self._swap_pending = new
            return
        choice, self._swap_choice = self._swap_choice, None
        old = self.runtime
        self.query("#swap-panel").remove()
        self.load_options = options_for(self.load_options, choice) if choice else self.load_options
        self._use_runtime(new)
        if old is not None:
            # `busy` is cleared when the answer's last message arrives; the thread that sent it may
            # still be leaving: wait for it before llama.cpp frees what it decoded with.
            if not self._idle.wait(30):
                self.unexpected_errors.append("the old models were not freed: a generation did not end\n")
                return
            try:
                old.close()
            except Exception:  # a bug in freeing must not end the chat: kept, printed by `specllama chat` on exit
                self.unexpected_errors.append(traceback.format_exc())
        self.notify(f"now using {new.target_name}" + (f" ← {new.draft_name}" if new.draft_name else ""))

    def close_pending_runtime(self) -> None:
        """At exit: a runtime loaded but never swapped in is freed too."""
        pending, self._swap_pending = self._swap_pending, None
        if pending is not None:
            pending.close()
