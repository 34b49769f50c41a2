"""`gpudvfs online ...`: the online time predictor on traces from measured grids."""

from __future__ import annotations

import sys
from dataclasses import replace as dc_replace

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, paired_line, print_json, table, user_errors
from gpudvfs.evaluation.online_replay import STREAMS, ReplaySettings
from gpudvfs.evaluation.online_replay import replay as run_replay
from gpudvfs.evaluation.online_traces import MOVES
from gpudvfs.online import FORMS

TARGET_RATIO = 0.5  # the online predictor's target: same-app MAPE at most half the last-value predictor's


@click.group()
def online() -> None:
    """The online time predictor (Gupta et al.): RLS on a differential time model."""


@online.command()
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--train", type=click.Path(dir_okay=False), default=None,
              help="Grid to train on (counter scales, Lasso, offline fit, Eq. 14); "
                   "default: the even-positioned applications of DATA, scoring the others.")
@click.option("--steps", default=2000, show_default=True, type=click.IntRange(min=ReplaySettings.start + 2),
              help="Trace length K (training traces have the same length).")
@options.seed()
@click.option("--moves", type=click.Choice(MOVES), default="random", show_default=True,
              help="A clock move goes to a random other level, or one level up or down.")
@click.option("--form", type=click.Choice(FORMS), default=ReplaySettings.form, show_default=True,
              help="Frequency term: the paper's f_prev/f_new - 1, or the inverse-clock basis.")
@click.option("--streams", type=click.Choice(STREAMS), default=ReplaySettings.streams, show_default=True,
              help="One RLS stream per application, or one for the whole trace (the paper).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def replay(data: str, train: str | None, steps: int, seed: int, moves: str, form: str, streams: str,
           as_json: bool) -> None:
    """Replay the online predictor on a trace drawn from the measurement grid DATA.

    At each step the application switches with probability 0.05 and each clock domain
    moves with probability 0.3; observed time = measured time x (1 + 1% noise). Prints the
    MAPE over steps k >= 50 of the last-value, online and offline predictors, and the
    error of the predicted time one clock level up and down.
    """
    settings = dc_replace(ReplaySettings(), form=form, streams=streams)
    with user_errors():
        try:
            r = run_replay(data, train, steps=steps, seed=seed, moves=moves, settings=settings)
        except ImportError as e:
            click.echo(f"gpudvfs: error: {e}", err=True)
            sys.exit(2)
    if as_json:
        print_json(r.to_dict())
        return
    console.print(f"[bold]{r.data}[/bold]: {steps} steps, seed {seed}, moves {moves}, "
                  f"form {form}, streams {streams}", highlight=False)
    console.print(f"trained on: {r.train_source} ({', '.join(r.train_apps)})", highlight=False)
    console.print(f"scored applications: {', '.join(r.scored_apps)}; {r.switches_scored} switches "
                  f"among the scored steps", highlight=False)
    for group in r.shared_time_curves:
        console.print(f"[yellow]note[/yellow]: {len(group)} applications have the same measured time at every "
                      f"configuration ({', '.join(group)}): a switch among them changes the counters, not the "
                      "time, and the online model effectively fits one curve", highlight=False)
    sel = r.selection
    console.print(f"features ({len(r.features.names)}): {', '.join(r.features.names)}  [Lasso 1-SE alpha "
                  f"{sel.alpha_1se:.3g}; {sel.n_at_alpha_min} features at the CV minimum"
                  f"{'' if sel.converged else '; coordinate descent did not converge everywhere'}]",
                  highlight=False)
    console.print(table(f"MAPE % over steps k >= {r.settings.start}", ["predictor", "all steps", "same application"],
                        [[name, f"{e.mape:.2f}", f"{e.mape_same_app:.2f}"]
                         for name, e in (("last value", r.naive), ("online (RLS)", r.online),
                                         ("offline (least squares on TRAIN)", r.offline))]))
    ratio = r.ratio_same_app
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    console.print(f"online / last value on same-application steps: {ratio:.3f} "
                  f"(target <= {TARGET_RATIO}: {verdict})", highlight=False)
    console.print("95% intervals over the scored applications (same-application steps), %: online "
                  + paired_line(r.intervals_same_app, {"naive": "last value", "offline": "offline"}), highlight=False)
    s = r.sensitivity
    rows = [[domain, f"{e.eq14:.2f}", f"{e.counters_held:.2f}", f"{e.no_change:.2f}"]
            for domain, e in (("all", s.errors), *s.per_domain.items())]
    console.print(table(f"sensitivity: time one level up and down, MAPE % ({s.cases} cases)",
                        ["domain", "Eq. 12 + Eq. 14", "counters held", "no change"], rows))
    console.print(f"one level moves the measured time by {s.mean_measured_change:.2f}% on average "
                  f"(observation noise {100 * settings.noise:g}%)", highlight=False)
