# A ReFrame configuration for running the umscope checks on the local machine (and in CI):
# one partition, local scheduler and launcher. A site adds `features: ['gpu']` to its GPU
# partitions so the GPU families run there.
import os

site_configuration = {
    "systems": [{
        "name": "local",
        "descr": "this machine",
        "hostnames": [".*"],
        "modules_system": "nomod",
        "partitions": [{
            "name": "default",
            "scheduler": "local",
            "launcher": "local",
            "environs": ["plain"],
            "features": ["gpu"] if os.environ.get("UMSCOPE_RFM_GPU") else [],
        }],
    }],
    "environments": [{"name": "plain", "cc": "cc", "cxx": "c++"}],
    "general": [{"report_file": os.environ.get("UMSCOPE_RFM_REPORT", "reframe-report.json")}],
}
