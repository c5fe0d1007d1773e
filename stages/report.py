"""DVC stage report: one self-contained HTML report and the headline metrics of the audits in params.yaml."""

from pathlib import Path

from dpaudit.pipeline.audits import audits_from_params
from dpaudit.pipeline.runner import run_stage
from dpaudit.report.render import build_report, config_from_params


def main() -> None:
    def body(params: dict) -> None:
        config = config_from_params(params)
        audits = [a.name for a in audits_from_params(params)]
        build_report(
            Path("."),
            Path("reports/index.html"),
            Path("metrics/summary.json"),
            title=config.title,
            audits=audits,
        )

    run_stage("report", body)


if __name__ == "__main__":
    main()
