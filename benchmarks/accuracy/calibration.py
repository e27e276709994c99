"""The calibrated estimator's accuracy with k measured rows per timm file (issue 10: k = 5, 50 draws).

For each timm file and k, `--draws` times: pick k of the file's rows at random as the user's measurements, fit
understudy.calibration.fit_correction to the base estimator's predictions of them (with their kernel-class shares),
and score the corrected predictions on the file's OTHER rows. The base's constants are the leave-one-GPU-out ones of
a `fit_constants.py --logo` report: a file of the RTX 3090 is predicted with the constants chosen on the RTX 4090,
and the other way round, so nothing the user did not measure was chosen on the target. `fitted_to_every_row_mape`
is the same correction fitted to all of a file's rows and scored on them: the floor of the correction's form,
whatever k.

    python benchmarks/accuracy/calibration.py analytic FILES... --logo-json analytic-logo.json --counts-cache C
    python benchmarks/accuracy/calibration.py hostaware FILES... --logo-json hostaware-logo.json --log LOG ...
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_constants import HOSTAWARE_HELD, Priced, group_of, load_samples, predict_with_shares
from understudy.calibration import CLASSES, PRIOR_POINTS, FitPoint, fit_correction

CHOSEN_WITHOUT = {"GeForce RTX 3090": "chosen_on_rtx4090", "GeForce RTX 4090": "chosen_on_rtx3090"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("estimator", choices=["analytic", "hostaware"])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--logo-json", type=Path, required=True, help="a fit_constants.py --logo report")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--counts-cache", type=Path)
    parser.add_argument("--ks", default="3,5,10")
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prior", type=float, default=PRIOR_POINTS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    constants = json.loads(args.logo_json.read_text())["constants"]
    samples = [s for s in load_samples(args.files, args.log, args.counts_cache, None)
               if not s.lambda_row and s.row["target"] in CHOSEN_WITHOUT]
    by_file: dict[str, list] = defaultdict(list)
    for sample in samples:
        by_file[group_of(sample)].append(sample)
    rng = random.Random(args.seed)
    report = {}
    for name, group in sorted(by_file.items()):
        values = {**constants[CHOSEN_WITHOUT[group[0].row["target"]]], **(HOSTAWARE_HELD if args.estimator ==
                                                                          "hostaware" else {})}
        predicted, shares = predict_with_shares(args.estimator, Priced(group), values)
        measured = np.array([s.measured_ms for s in group])
        modes = [s.workload.mode for s in group]
        share_dicts = [dict(zip(CLASSES, row.tolist(), strict=True)) for row in shares]
        base = float(np.mean(np.abs(predicted / measured - 1)) * 100)
        # The floor of this correction's form: fitted to every row of the file with no pull toward zero-shot and
        # scored on those same rows, it is the best any number of the user's points could do.
        everything = fit_correction([FitPoint(predicted_ms=p, measured_ms=m, mode=mode, shares=share)
                                     for p, m, mode, share in zip(predicted, measured, modes, share_dicts,
                                                                  strict=True)], prior_points=1e-6)
        floor = np.array([p * everything.factor(share, mode)
                          for p, mode, share in zip(predicted, modes, share_dicts, strict=True)])
        report[name] = {"rows": len(group), "uncalibrated_mape": round(base, 2),
                        "fitted_to_every_row_mape": round(float(np.mean(np.abs(floor / measured - 1)) * 100), 2)}
        for k in (int(v) for v in args.ks.split(",")):
            scores = []
            for _ in range(args.draws):
                chosen = set(rng.sample(range(len(group)), k))
                fit = fit_correction([FitPoint(predicted_ms=predicted[i], measured_ms=measured[i], mode=modes[i],
                                               shares=share_dicts[i]) for i in chosen], prior_points=args.prior)
                rest = [i for i in range(len(group)) if i not in chosen]
                corrected = np.array([predicted[i] * fit.factor(share_dicts[i], modes[i]) for i in rest])
                scores.append(float(np.mean(np.abs(corrected / measured[rest] - 1)) * 100))
            report[name][f"k={k}"] = {"mean": round(float(np.mean(scores)), 2), "min": round(min(scores), 2),
                                      "max": round(max(scores), 2)}
    text = json.dumps({"estimator": args.estimator, "prior_points": args.prior, "draws": args.draws,
                       "files": report}, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
