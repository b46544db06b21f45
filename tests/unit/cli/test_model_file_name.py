"""The CLI names the model file the services load (its stdlib-only copy of the name)."""

from totalrecall.paths import DEFAULT_MODEL_FILE
from totalrecall_schema.service_settings import DEFAULT_MODEL_FILE as SERVICES_MODEL_FILE


def test_the_cli_and_the_services_name_one_model_file() -> None:
    assert DEFAULT_MODEL_FILE == SERVICES_MODEL_FILE
