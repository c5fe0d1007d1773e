"""DVC stage check: validate every parameter and input of params.yaml before any other stage does work
(:func:`dpaudit.pipeline.run_check`)."""

from dpaudit.pipeline import run_check, run_stage


def main() -> None:
    run_stage("check", run_check)


if __name__ == "__main__":
    main()
