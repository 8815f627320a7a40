"""Reading and writing results directories: a strict streaming loader into tables, a crash-safe writer.

The loader decodes records.jsonl in blocks with msgspec (typed, C speed), checks what types cannot say
(times in order, counts that add up, arms and workloads of campaign.json, duplicates) column-wise, and
only for a record that breaks something computes the `file:line: key: message` lines one by one.

One module per job: `common` (names, limits, the Results tables, hashes), `campaign_json`, `decode`
(the fast block decoder, kept whole), `checks` (what the types cannot say), `load`, `write`.
"""

from mtpverdict.formats.results_io.campaign_json import (
    campaign_from_json,
    load_campaign,
)
from mtpverdict.formats.results_io.checks import (
    record_problems,
)
from mtpverdict.formats.results_io.common import (
    BLOCK_BYTES,
    CAMPAIGN_FILE,
    MAX_LINE_BYTES,
    MAX_PROBLEMS_KEPT,
    RAW_DIR,
    RECORDS_FILE,
    TABLE_KEYS,
    TIME_SLACK,
    Results,
    content_sha256,
    line_digest,
    safe_relative,
)
from mtpverdict.formats.results_io.decode import (
    SHARED_NAMES,
)
from mtpverdict.formats.results_io.load import (
    ENUM_COLUMNS,
    NUMERIC_REQUEST_FIELDS,
    load_results,
    results_from_records,
)
from mtpverdict.formats.results_io.write import (
    RESUMABLE_KEYS,
    TORN_FILE,
    ResultsWriter,
    record_errors,
    record_key,
    resume_problem,
)

__all__ = [
    "BLOCK_BYTES",
    "CAMPAIGN_FILE",
    "ENUM_COLUMNS",
    "MAX_LINE_BYTES",
    "MAX_PROBLEMS_KEPT",
    "NUMERIC_REQUEST_FIELDS",
    "RAW_DIR",
    "RECORDS_FILE",
    "RESUMABLE_KEYS",
    "Results",
    "ResultsWriter",
    "SHARED_NAMES",
    "TABLE_KEYS",
    "TIME_SLACK",
    "TORN_FILE",
    "content_sha256",
    "line_digest",
    "load_campaign",
    "load_results",
    "campaign_from_json",
    "record_errors",
    "record_key",
    "record_problems",
    "results_from_records",
    "resume_problem",
    "safe_relative",
]
