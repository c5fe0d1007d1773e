"""DVC stage report: one self-contained HTML report and the headline metrics of every audit."""

from pathlib import Path

from dpaudit.config import section
from dpaudit.pipeline import run_stage
from dpaudit.report.render import build_report


def main() -> None:
    def body(params: dict) -> None:
        title = section(params, "report").get("title", "dpaudit audit report")
        build_report(Path("."), Path("reports/index.html"), Path("metrics/summary.json"), title=title)

    run_stage("report", body)


if __name__ == "__main__":
    main()
