"""Mode choice and environment diagnosis: pure rules fed every situation, and real processes forced into each mode."""

from __future__ import annotations

import pytest
from conftest import run_python

import gpucourse
from gpucourse import environment, mode
from gpucourse.environment import DriverProbe, Finding, choose_mode
from gpucourse.errors import EnvironmentProblem

GPU = DriverProbe(loaded=True, driver_version=12040, devices=({"ordinal": 0, "name": "Fake GPU"},))
NO_DRIVER = DriverProbe(loaded=False, problem="no NVIDIA driver found (libcuda.so.1 could not be loaded)")
NO_DEVICE = DriverProbe(loaded=True, problem="the NVIDIA driver sees no GPU", driver_version=12040)


def test_probe_never_raises_and_agrees_with_mode():
    probe = environment.probe_driver()
    assert isinstance(probe, DriverProbe)
    if mode.on_gpu():
        assert probe.usable and probe.driver_version and probe.devices[0]["multiprocessors"] > 0
    elif not probe.usable:
        assert probe.problem


@pytest.mark.parametrize(
    "requested, sim_env, imported, probe, expected",
    [
        (None, None, "absent", GPU, "gpu"),
        (None, None, "absent", NO_DRIVER, "simulator"),
        (None, None, "absent", NO_DEVICE, "simulator"),
        ("auto", "1", "absent", GPU, "simulator"),
        ("simulator", None, "absent", GPU, "simulator"),
        ("SIMULATOR", None, "simulator", NO_DRIVER, "simulator"),
        ("gpu", None, "absent", GPU, "gpu"),
        (None, None, "simulator", GPU, "simulator"),
        (None, "1", "gpu", GPU, "gpu"),
        (None, "0", "absent", GPU, "gpu"),
    ],
)
def test_choose_mode(requested, sim_env, imported, probe, expected):
    chosen, findings = choose_mode(requested, sim_env, imported, probe)
    assert chosen == expected
    assert all(isinstance(f, Finding) for f in findings)


def test_no_gpu_is_explained_in_words():
    _, findings = choose_mode(None, None, "absent", NO_DRIVER)
    assert any("libcuda.so.1" in f.message and "simulator" in f.message for f in findings)


def test_simulator_switched_on_after_import_is_a_warning():
    _, findings = choose_mode(None, "1", "gpu", GPU)
    assert [f.level for f in findings] == ["warning"]
    assert "after numba.cuda was imported" in findings[0].message


def test_simulator_loaded_but_gpu_present_is_a_warning():
    _, findings = choose_mode(None, None, "simulator", GPU)
    assert findings and findings[0].level == "warning" and "not used" in findings[0].message


@pytest.mark.parametrize(
    "requested, sim_env, imported, probe, words",
    [
        ("gpu", None, "absent", NO_DRIVER, "Unset GPUCOURSE_MODE"),
        ("gpu", "1", "absent", GPU, "NUMBA_ENABLE_CUDASIM"),
        ("gpu", None, "simulator", GPU, "restart the Python kernel"),
        ("simulator", None, "gpu", GPU, "Restart the Python kernel"),
        (None, None, "gpu", NO_DRIVER, "import gpucourse"),
        ("fast", None, "absent", GPU, "not a mode"),
    ],
)
def test_impossible_requests_raise_with_the_fix(requested, sim_env, imported, probe, words):
    with pytest.raises(EnvironmentProblem, match=words):
        choose_mode(requested, sim_env, imported, probe)


@pytest.mark.parametrize("version, too_new", [("2.4.6", False), ("2.5.0", True), ("2.5.2", True), ("3.0.0rc1", True), ("1.26.4", False)])
def test_numpy_too_new(version, too_new):
    finding = environment.check_numpy(version, "0.30.4")
    assert (finding is not None) == too_new
    if too_new:
        assert finding.level == "error" and "numpy<2.5" in finding.fix


def test_parse_and_format_versions():
    assert environment.parse_version("0.30.4rc1") == (0, 30, 4)
    assert environment.format_cuda_version(12040) == "12.4"
    assert environment.format_cuda_version(13000) == "13.0"
    assert environment.format_cuda_version(None) == "unknown"


def test_ptx_version_error_is_explained():
    message = "CudaAPIError: [222] Call to cuModuleLoadDataEx results in CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
    finding = environment.explain_cuda_failure(message, 12020, (12, 8))
    assert finding.level == "error"
    assert "12.2" in finding.message and "12.8" in finding.message and "older" in finding.message
    assert "driver" in finding.fix


def test_missing_nvvm_is_explained():
    finding = environment.explain_cuda_failure("NvvmSupportError: libNVVM cannot be found", 12040, (12, 4))
    assert "numba-cuda[cu12]" in finding.fix


def test_toolkit_newer_than_driver_warns():
    assert environment.check_toolkit_against_driver(12020, (12, 8)).level == "warning"
    assert environment.check_toolkit_against_driver(12080, (12, 8)) is None
    assert environment.check_toolkit_against_driver(None, (12, 8)) is None


def test_numba_cuda_state():
    assert environment.numba_cuda_state({}) == "absent"
    assert environment.numba_cuda_state({"numba.cuda": 1}) == "gpu"
    assert environment.numba_cuda_state({"numba.cuda": 1, "numba.cuda.simulator_init": 1}) == "simulator"


# --- real processes, forced into each mode -------------------------------------------------------


def test_forcing_simulator_mode():
    result = run_python("import gpucourse, sys; print(gpucourse.MODE); print('numba.cuda.simulator_init' in sys.modules)",
                        GPUCOURSE_MODE="simulator")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["simulator", "True"]


def test_forcing_gpu_mode():
    result = run_python("import gpucourse; print(gpucourse.MODE)", GPUCOURSE_MODE="gpu")
    if mode.PROBE.usable:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "gpu"
    else:
        assert result.returncode != 0
        assert "EnvironmentProblem" in result.stderr and "GPUCOURSE_MODE=gpu" in result.stderr


def test_bad_mode_name_is_refused():
    result = run_python("import gpucourse", GPUCOURSE_MODE="turbo")
    assert result.returncode != 0 and "not a mode" in result.stderr


def test_numba_imported_first_still_gets_the_simulator():
    result = run_python("import numba; import gpucourse; print(gpucourse.MODE)", GPUCOURSE_MODE="simulator")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "simulator"


def test_numba_cuda_imported_first():
    result = run_python("from numba import cuda; import gpucourse; print(gpucourse.MODE)")
    if mode.PROBE.usable:
        assert result.stdout.strip() == "gpu", result.stderr
    else:
        assert result.returncode != 0 and "import gpucourse" in result.stderr


def test_simulator_env_after_numba_cuda_import_is_reported():
    code = ("from numba import cuda; import os; os.environ['NUMBA_ENABLE_CUDASIM'] = '1'\n"
            "import gpucourse; print(gpucourse.MODE); print(any('after numba.cuda' in f.message for f in gpucourse.diagnose()))")
    result = run_python(code)
    if mode.PROBE.usable:
        assert result.stdout.split() == ["gpu", "True"], result.stderr
    else:
        assert result.returncode != 0 and "import gpucourse" in result.stderr


def test_banner_names_mode_and_device():
    banner = gpucourse.banner()
    text, page = str(banner), banner._repr_html_()
    if mode.is_simulator():
        assert "SIMULATOR MODE" in text and "not a GPU" in text
    else:
        assert "GPU MODE" in text and gpucourse.current_device().name in text
        assert any(f.level == "ok" and "first kernel" in f.message for f in banner.findings)
    assert "Device:" in page and "<div" in page


def test_versions_lists_numba():
    from gpucourse.banner import versions

    found = versions()
    assert "numba" in found and "numpy" in found and "python" in found


def test_numpy_too_new_stops_the_import_with_the_fix():
    code = ("import importlib.metadata as metadata\n"
            "real = metadata.version\n"
            "metadata.version = lambda name: '2.5.1' if name == 'numpy' else real(name)\n"
            "import gpucourse\n")
    result = run_python(code)
    assert result.returncode != 0
    assert "EnvironmentProblem" in result.stderr and "NumPy 2.5.1 is too new" in result.stderr and "numpy<2.5" in result.stderr
