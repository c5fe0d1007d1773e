"""DVC stage check: validate every parameter of params.yaml before any other stage does work."""

from dpaudit.pipeline import run_check, run_stage


def main() -> None:
    run_stage("check", run_check)


if __name__ == "__main__":
    main()
