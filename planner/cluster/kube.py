"""A thin raw-JSON door to the Kubernetes API: connect, get, list (paginated), write.

Everything goes through the official client's connection handling (kubeconfig or
in-cluster config, TLS, tokens) but bodies stay plain JSON: no model classes are
built, which is what makes listing tens of thousands of pods fast, and the dicts
are exactly what the file reader takes. Errors become ClusterError with the
method, path, HTTP status and the API server's message; no header, token or
kubeconfig content is ever put in a message: the server's URL is shown without its
user-info (https://user:password@host), and every message, the API server's own
included, goes through `scrub`. A kubeconfig that is not valid YAML is bad input
(exit 2, naming the file and line), as any other file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import threading
from typing import Any, Callable, Iterator
from urllib.parse import quote, urlsplit, urlunsplit

from planner.base import interrupt
from planner.base.errors import ClusterError, InputError

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
PAGE_SIZE = 500
MAX_PAGES = 20_000   # 10 million objects of one kind at PAGE_SIZE: past any cluster Kubernetes supports
TIMEOUT = 30.0


class ApiStatus(ClusterError):
    """A non-2xx answer; `status` is the HTTP code (409 conflict, 404 not found, ...)."""

    def __init__(self, method: str, path: str, status: int, message: str):
        self.status, self.method, self.path, self.detail = status, method, path, message
        super().__init__(f"{method} {path}: HTTP {status}: {message}")


def connect(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ApiClient from --kubeconfig, else $KUBECONFIG/~/.kube/config, else in-cluster config."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    import yaml

    _scrub_client_logs()
    bound_exec_plugins()
    configuration = client.Configuration()
    where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        if kubeconfig or not _in_cluster():
            check_kubeconfig_files(kubeconfig)
            config.load_kube_config(   # type: ignore[no-untyped-call]  # the kubernetes client leaves it unannotated
                config_file=kubeconfig, context=context, client_configuration=configuration)
        else:
            config.load_incluster_config(   # type: ignore[no-untyped-call]  # the kubernetes client leaves it unannotated
                client_configuration=configuration)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise InputError(f"malformed kubeconfig YAML{line}: {scrub(str(problem))}",
                         file=str(getattr(mark, "name", "") or where)) from None
    except (ConfigException, OSError) as err:
        raise ClusterError(f"cannot load the cluster configuration ({where}): {_scrub(_plugin_output(str(err)))}") \
            from None
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as err:
        # the client reads fields without checking their shape: `users: 5` ends here
        raise InputError(f"malformed kubeconfig: {type(err).__name__}: {_scrub(str(err))}", file=where) from None
    return client.ApiClient(configuration)


def connect_text(text: bytes, where: str) -> Any:
    """An ApiClient from a kubeconfig's content (a MultiKueueCluster's Secret): decoded with
    the snapshot's bounds, never written to disk, `where` naming it in errors (never its content)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    from planner.snapshot import loader

    _scrub_client_logs()
    bound_exec_plugins()
    if len(text) > KUBECONFIG_MAX_BYTES:
        raise InputError(f"kubeconfig larger than {KUBECONFIG_MAX_BYTES} bytes", file=where)
    documents = list(loader.decode(where, text))
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise InputError("not one kubeconfig mapping", file=where)
    check_files_named_in(documents[0], where)
    configuration = client.Configuration()
    try:
        config.load_kube_config_from_dict(   # type: ignore[no-untyped-call]  # the client leaves it unannotated
            documents[0], client_configuration=configuration, persist_config=False)
    except ConfigException as err:
        raise ClusterError(f"cannot load the cluster configuration ({where}): {_scrub(str(err))}") from None
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as err:
        raise InputError(f"malformed kubeconfig: {type(err).__name__}: {_scrub(str(err))}", file=where) from None
    return client.ApiClient(configuration)


# Set by the CLI's -v: an exec credential plugin's own stderr (which may echo a token or a
# login URL) is shown only then
verbose = False
_PLUGIN_FAILED = re.compile(r"^(exec: process returned -?\d+)\. .*", re.DOTALL)


def _plugin_output(message: str) -> str:
    """The client's exec-plugin failure without the plugin's stderr, unless -v."""
    if verbose:
        return message
    return _PLUGIN_FAILED.sub(r"\1 (its stderr is shown with -v)", message)


EXEC_PLUGIN_SECONDS = 30.0        # a credential plugin that has not answered by then is waiting for a login no one gives
EXEC_PLUGIN_MAX_CHARS = 1 << 20   # an ExecCredential is a few KB; its stderr is read to the same bound


class BoundedPlugin(subprocess.Popen[str]):
    """The Kubernetes client runs an exec credential plugin with Popen and an unbounded
    communicate(): a plugin that hangs (waiting for a login no one gives) would hang
    `snapshot` and a CronJob's `plan` forever, and one that writes gigabytes would be read
    whole into memory. Here communicate() stops at EXEC_PLUGIN_SECONDS and at
    EXEC_PLUGIN_MAX_CHARS of either stream, killing the plugin; the client then reports it
    failed (ConfigException), a ClusterError naming the limit."""

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        from kubernetes.config.config_exception import ConfigException

        streams = [s for s in (self.stdout, self.stderr) if s is not None]
        read: dict[Any, list[str]] = {s: [] for s in streams}
        over: list[bool] = []
        readers = [threading.Thread(target=self._drain, args=(s, read[s], over), daemon=True) for s in streams]
        for reader in readers:
            reader.start()
        readers[0].join(EXEC_PLUGIN_SECONDS)   # both streams end when the plugin does
        for reader in readers[1:]:
            reader.join(0.5 if readers[0].is_alive() else EXEC_PLUGIN_SECONDS)
        if any(reader.is_alive() for reader in readers) or over:
            self.kill()
            self.wait()
            why = (f"wrote more than {EXEC_PLUGIN_MAX_CHARS:,} characters" if over
                   else f"did not answer within {EXEC_PLUGIN_SECONDS:g} seconds")
            raise ConfigException(f"exec: the credential plugin {why}; it was stopped")
        self.wait()
        return ("".join(read[self.stdout]) if self.stdout is not None else None,
                "".join(read[self.stderr]) if self.stderr is not None else None)

    def _drain(self, stream: Any, into: list[str], over: list[bool]) -> None:
        total = 0
        while chunk := stream.read(1 << 16):
            total += len(chunk)
            if total > EXEC_PLUGIN_MAX_CHARS:
                over.append(True)
                self.kill()
                return
            into.append(chunk)


def bound_exec_plugins() -> None:
    """The client's exec credential plugins run through BoundedPlugin (its module's own
    `subprocess.Popen` name is replaced; nothing else in the process is touched)."""
    import types

    from kubernetes.config import exec_provider

    if getattr(getattr(exec_provider, "subprocess"), "Popen", None) is not BoundedPlugin:
        setattr(exec_provider, "subprocess", types.SimpleNamespace(Popen=BoundedPlugin, PIPE=subprocess.PIPE))


class _ScrubbedLog(logging.Filter):
    """The Kubernetes client and urllib3 log through the root logger (the client's
    `logging.error` of a failed exec plugin quotes the plugin's stderr): every record is
    scrubbed of credentials, and the plugin's stderr kept only with -v."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(_plugin_output(record.getMessage()))
        record.args = ()
        return True


def _scrub_client_logs() -> None:
    """A root handler with the filter, before the client's first `logging.error` would
    install an unfiltered one (module-level logging calls basicConfig on an empty root)."""
    root = logging.getLogger()
    if any(isinstance(f, _ScrubbedLog) for handler in root.handlers for f in handler.filters):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    handler.addFilter(_ScrubbedLog())
    root.addHandler(handler)


def check_kubeconfig_files(kubeconfig: str | None) -> None:
    """The kubeconfig files that exist are regular files of sane size (a FIFO would hang the
    client) whose YAML the snapshot's bounded decoder reads: an alias bomb is refused here,
    before the client's own unbounded yaml.safe_load could expand it."""
    from planner.snapshot import loader

    paths = [kubeconfig] if kubeconfig else (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
    for path in paths:
        path = os.path.expanduser(path)
        if path and os.path.lexists(path):
            try:
                documents = list(loader.decode(path, loader.read_bytes(path, KUBECONFIG_MAX_BYTES)))
            except InputError as err:
                raise InputError(err.detail.replace("malformed YAML", "malformed kubeconfig YAML", 1),
                                 file=path) from None
            for document in documents:
                check_files_named_in(document, path)


KUBECONFIG_FILE_FIELDS = {"users": ("user", ("tokenFile", "client-certificate", "client-key")),
                          "clusters": ("cluster", ("certificate-authority",))}
KUBECONFIG_FILE_MAX_BYTES = 1 << 20   # a token, a certificate or a key: a few KB


def check_files_named_in(kubeconfig: Any, path: str) -> None:
    """The files a kubeconfig names (a token file, certificates, a key) are regular files of
    at most KUBECONFIG_FILE_MAX_BYTES: the client reads them whole and blocking, so a FIFO
    would hang it and /dev/zero exhaust memory. Relative names are from the kubeconfig's folder."""
    if type(kubeconfig) is not dict:
        return
    for section, (inner, fields) in KUBECONFIG_FILE_FIELDS.items():
        entries = kubeconfig.get(section)
        for index, entry in enumerate(entries if type(entries) is list else ()):
            body = entry.get(inner) if type(entry) is dict else None
            if type(body) is not dict:
                continue
            for field in fields:
                named = body.get(field)
                if type(named) is str and named:
                    _check_named_file(os.path.join(os.path.dirname(path), os.path.expanduser(named)),
                                      path, f"{section}[{index}].{inner}.{field}")


def _check_named_file(named: str, path: str, field: str) -> None:
    import stat

    from planner.snapshot import loader

    try:
        info = os.stat(named)
    except OSError:
        return          # missing: the client's own error names it
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"names {named!r}, which is {loader.file_kind(info.st_mode)}: only a regular file is read",
                         file=path, field=field)
    if info.st_size > KUBECONFIG_FILE_MAX_BYTES:
        raise InputError(f"names {named!r} of {info.st_size:,} bytes, more than the limit of "
                         f"{KUBECONFIG_FILE_MAX_BYTES:,}", file=path, field=field)


KUBECONFIG_MAX_BYTES = 64 * 2**20


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG") and \
        not os.path.exists(os.path.expanduser("~/.kube/config"))


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]*@")
_SECRET_PATTERNS = (   # (pattern, replacement)
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 <redacted>"),      # Authorization values
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), "<redacted>"),  # JWTs (SA tokens)
    (re.compile(r"(?i)\b(token|password|passwd|secret|client-key-data|api[-_]?key)(\s*[=:]\s*)(\"[^\"]*\"|[^\s,;]+)"),
     r"\1\2<redacted>"),
    (re.compile(r"(?i)(\b(?:env|envFrom|secret\w*|token|password)\S*: Invalid value: )\"[^\"]*\""),
     r'\1"<redacted>"'),
    # values quoted back in a diff of a refused update ("Value": "...", env and tolerations alike)
    (re.compile(r'("(?:Value|value)":\s*)"(?:[^"\\]|\\.)*"'), r'\1"<redacted>"'),
    # the same in Go's struct format (`Env:[]EnvVar{EnvVar{Name:PASS,Value:"s3cret",...}`), quoted
    # or not, and the command lines of a container quoted back whole
    (re.compile(r'\b(Value:)"(?:[^"\\]|\\.)*"'), r'\1"<redacted>"'),
    (re.compile(r'\b(Value:)(?!nil\b|&|")[^,}\s]*'), r"\1<redacted>"),
    (re.compile(r"\b(Command|Args|Entrypoint|RuntimeEnvYAML|RayStartParams):(\[\]string|map\[string\]string)?\{[^}]*\}"),
     r"\1:\2{<redacted>}"),
    # a whole object quoted back ("spec.template.spec: Invalid value: {...}: field is immutable")
    # carries env values and commands: only its place is kept
    (re.compile(r"Invalid value: \{.*?(?:\}(: )|$)"), r"Invalid value: {...}\1"),
)


def scrub(text: str) -> str:
    """`text` with whatever looks like a credential taken out: user-info in URLs, bearer
    tokens and JWTs, `password=...`-style values, and values the API server quotes back
    from env or secret-like fields. At most 500 characters."""
    text = _USERINFO.sub(r"\1", str(text))
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text[:500]


def _scrub(text: str) -> str:
    """For the client's own errors (config, connection): scrubbed, and withheld altogether
    when they still speak of credentials (they may quote a kubeconfig's content)."""
    text = scrub(text)
    lowered = text.replace("<redacted>", "").lower()
    for word in ("token", "password", "bearer", "authorization", "client-key"):
        if word in lowered:
            return "(details withheld: the message mentions credentials)"
    return text


def url_without_userinfo(url: str) -> str:
    """https://user:password@host:6443/x?token=t -> https://host:6443/x: the user-info and
    the query (an API server's URL needs neither; either may carry a credential)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return scrub(url)
    if parts.username is None and parts.password is None and not parts.query and not parts.fragment:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class Kube:
    """Raw JSON requests on one ApiClient. `dry_run` adds dryRun=All to every write."""

    def __init__(self, api_client: Any, *, dry_run: bool = False, timeout: float = TIMEOUT):
        self.api = api_client
        self.dry_run = dry_run
        self.timeout = timeout
        self.writes = 0               # counted for reports and tests
        self._lock = threading.Lock()  # writes may come from several threads (Applier workers)
        self.before_write: Callable[[str, str], None] | None = None   # test hook: (method, path)
        # the API server's clock (its `Date` header) at the last answer: judging another
        # component's Lease by the server's time, not by how fast or wrong the local clock is
        self.last_date = ""

    @property
    def host(self) -> str:
        """The API server's URL, never with user-info (it may hold a password)."""
        return url_without_userinfo(str(getattr(self.api.configuration, "host", "?")))

    def request(self, method: str, path: str, *, query: list[tuple[str, Any]] | None = None,
                body: Any = None, content_type: str = JSON) -> Any:
        """One call; returns the decoded JSON body (or None); raises ApiStatus / ClusterError."""
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            m, url, hdrs, data, _ = self.api.param_serialize(
                method, path, query_params=query or [], header_params=headers, body=body,
                auth_settings=["BearerToken"])
            response = self.api.call_api(m, url, hdrs, data, _request_timeout=self.timeout)
            raw = response.read()
            self.last_date = str((getattr(response, "headers", None) or {}).get("Date") or "")
        except ClusterError:
            raise
        except Exception as err:  # urllib3 connection errors, timeouts, TLS
            raise ClusterError(f"{method} {path}: cannot reach the API server at {self.host}: "
                               f"{type(err).__name__}: {_scrub(_reason(err))}") from None
        if not 200 <= response.status < 300:
            raise ApiStatus(method, path, response.status, _message(raw, response.reason))
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ClusterError(f"{method} {path}: the API server answered with something that is not JSON") from None
        except RecursionError:
            raise ClusterError(f"{method} {path}: the API server's answer is nested too deeply to read") from None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except ApiStatus as err:
            if err.status == 404:
                return None
            raise

    def list(self, path: str, *, label_selector: str | None = None, page_size: int = PAGE_SIZE) -> Iterator[dict[str, Any]]:
        """Every item of a collection, page by page (limit/continue), with kind and apiVersion set."""
        token = ""
        seen: set[str] = set()
        while True:
            query: list[tuple[str, Any]] = [("limit", page_size)]
            if token:
                query.append(("continue", token))
            if label_selector:
                query.append(("labelSelector", label_selector))
            page = self.request("GET", path, query=query)
            where = f"{self.host}{path}"
            if type(page) is not dict:
                raise InputError(f"the API server's list answer is {type(page).__name__}, not a List object",
                                 file=where)
            items = page.get("items")
            metadata = page.get("metadata")
            if items is not None and type(items) is not list or metadata is not None and type(metadata) is not dict:
                raise InputError("the API server's list answer is malformed", file=where,
                                 field="items" if items is not None and type(items) is not list else "metadata")
            kind = str(page.get("kind", ""))
            item_kind = kind[:-4] if kind.endswith("List") else kind
            api_version = page.get("apiVersion", "")
            for index, item in enumerate(items or ()):
                if type(item) is not dict:
                    raise InputError(f"the API server's list answer holds {type(item).__name__}, not an object",
                                     file=where, field=f"items[{index}]")
                item.setdefault("kind", item_kind)
                item.setdefault("apiVersion", api_version)
                yield item
            token = (metadata or {}).get("continue") or ""
            if not token:
                return
            if type(token) is not str:
                raise InputError("the API server's continue token is not a string", file=where,
                                 field="metadata.continue")
            if token in seen:   # a server (or proxy) that repeats a page would be read forever
                raise InputError(f"the API server repeated a continue token after {len(seen) + 1} pages; "
                                 "the list would never end", file=where, field="metadata.continue")
            seen.add(token)
            if len(seen) >= MAX_PAGES:
                raise InputError(f"more than {MAX_PAGES:,} pages of {page_size} (more than "
                                 f"{MAX_PAGES * page_size:,} objects of one kind)", file=where)

    def write(self, method: str, path: str, body: Any, content_type: str = JSON) -> Any:
        """A write, with dryRun=All when this Kube is a dry run.

        Once Ctrl-C or SIGTERM has come (planner.base.interrupt), no write starts, from any thread
        (Interrupted); a write already in flight finishes first, so the cluster is left as
        after a crash between two writes, which every step is safe against (planner.cluster.apply)."""
        query = [("dryRun", "All")] if self.dry_run else []
        interrupt.check()
        with interrupt.deferred():
            if self.before_write is not None:
                self.before_write(method, path)
            result = self.request(method, path, query=query, body=body, content_type=content_type)
            with self._lock:
                self.writes += 1
        return result


def _reason(err: Exception) -> str:
    reason = getattr(err, "reason", None)
    return str(reason if reason is not None else err)


def _message(raw: bytes, fallback: str | None) -> str:
    """The API server's message, scrubbed (it may quote back what was sent)."""
    try:
        status = json.loads(raw)
        if isinstance(status, dict) and status.get("message"):
            return scrub(str(status["message"]))
    except (ValueError, RecursionError):
        pass
    text = raw.decode("utf-8", "replace").strip() if raw else ""
    return scrub(text or fallback or "no message")


def path_of(api_version: str, plural: str, namespace: str = "", name: str = "") -> str:
    """/api/v1/... or /apis/GROUP/VERSION/..., namespaced or not, one object or a collection."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    if name:
        base += f"/{quote(name, safe='')}"
    return base
