'use strict';

// Reference service under test built like seed 003's stack: a Node API gateway
// whose requests all share one concurrency cap, one route calling a slow
// identity-verification vendor, and (profile "after") an opossum circuit
// breaker around that call with opossum-prometheus metrics.
//
// Configuration: environment variables, or the same names as CLI flags
// (--vendor-timeout-ms 300 sets VENDOR_TIMEOUT_MS; flags win). See README.md.

const http = require('node:http');
const crypto = require('node:crypto');
const CircuitBreaker = require('opossum');
const PrometheusMetrics = require('opossum-prometheus');
const promClient = require('prom-client');

const BREAKER_NAME = 'vendor';
const APPROVE_PATH = '/v1/payments/approve';
const MAX_BODY_BYTES = 64 * 1024;
const SHUTDOWN_GRACE_MS = 1000; // then connections are cut; exit well within 2 s

// ------------------------------------------------------------------ config

function fail (message) {
  process.stderr.write(`node-gateway: ${message}\n`);
  process.exit(2);
}

function parseFlags (argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      process.stdout.write('usage: node server.js [--port N] [--pg-url URL] [--profile P] ' +
        '[--max-concurrency N] [--metrics-port N] [--<any-env-name> VALUE]\n' +
        'Every flag is the lower-case, dashed form of an environment variable; see README.md.\n');
      process.exit(0);
    }
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(arg);
    if (!m) fail(`unexpected argument ${JSON.stringify(arg)}`);
    let value = m[2];
    if (value === undefined) {
      if (i + 1 >= argv.length) fail(`${arg} needs a value`);
      value = argv[++i];
    }
    out[m[1].toUpperCase().replace(/-/g, '_')] = value;
  }
  return out;
}

const PROFILES = {
  // Seed's starting point: 30 s timeout, 2 immediate retries, no breaker.
  before: { vendorTimeoutMs: 30000, retries: 2, breaker: false, separated: false },
  // Day-of hotfix: 3 s timeout, no retry.
  hotfix: { vendorTimeoutMs: 3000, retries: 0, breaker: false, separated: false },
  // Week 3: opossum breaker (5 s, 50 %, 30 s, volume 20), no retry.
  after: { vendorTimeoutMs: 5000, retries: 0, breaker: true, separated: false },
  // Post-mortem worker split: verification in its own pool; no breaker by
  // default so the bulkhead's effect can be measured alone (BREAKER=1 adds it).
  separated: { vendorTimeoutMs: 5000, retries: 0, breaker: false, separated: true }
};

const KNOWN = new Set([
  'PORT', 'HOST', 'PG_URL', 'PROFILE', 'MAX_CONCURRENCY', 'VERIFY_CONCURRENCY', 'MAX_QUEUE',
  'METRICS_PORT', 'VENDOR_TIMEOUT_MS', 'RETRIES', 'RETRY_BACKOFF_MS', 'BREAKER',
  'CB_TIMEOUT_MS', 'CB_ERROR_THRESHOLD', 'CB_RESET_TIMEOUT_MS', 'CB_VOLUME_THRESHOLD',
  'CB_ROLLING_COUNT_TIMEOUT_MS', 'CB_ROLLING_COUNT_BUCKETS'
]);

function loadConfig () {
  const flags = parseFlags(process.argv.slice(2));
  for (const name of Object.keys(flags)) {
    if (!KNOWN.has(name)) fail(`unknown flag --${name.toLowerCase().replace(/_/g, '-')}`);
  }
  const get = (name) => (flags[name] !== undefined ? flags[name] : process.env[name]);
  const int = (name, dflt, min, max) => {
    const raw = get(name);
    if (raw === undefined || raw === '') return dflt;
    if (!/^-?\d+$/.test(String(raw).trim())) fail(`${name} must be an integer, got ${JSON.stringify(raw)}`);
    const n = Number(raw);
    if (n < min || n > max) fail(`${name} must be between ${min} and ${max}, got ${n}`);
    return n;
  };
  const bool = (name, dflt) => {
    const raw = get(name);
    if (raw === undefined || raw === '') return dflt;
    const v = String(raw).trim().toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(v)) return true;
    if (['0', 'false', 'no', 'off'].includes(v)) return false;
    return fail(`${name} must be 1/0/true/false, got ${JSON.stringify(raw)}`);
  };

  const profileName = (get('PROFILE') || 'before').trim();
  const profile = PROFILES[profileName];
  if (!profile) fail(`PROFILE must be one of ${Object.keys(PROFILES).join('|')}, got ${JSON.stringify(profileName)}`);

  const host = get('HOST');
  if (host !== undefined && host !== '' && host !== '127.0.0.1') {
    fail(`refusing to bind ${JSON.stringify(host)}: this test target listens on 127.0.0.1 only`);
  }
  if (get('PORT') === undefined || get('PORT') === '') fail('PORT is required');
  const port = int('PORT', 0, 0, 65535);
  const metricsRaw = get('METRICS_PORT');
  const metricsPort = metricsRaw === undefined || metricsRaw === '' ? null : int('METRICS_PORT', 0, 1, 65535);

  const pgRaw = get('PG_URL');
  if (!pgRaw) fail('PG_URL is required (base URL of the payment/verification vendor, e.g. http://127.0.0.1:8089)');
  let pg;
  try {
    pg = new URL(pgRaw);
  } catch (e) {
    fail(`PG_URL is not a URL: ${JSON.stringify(pgRaw)}`);
  }
  if (pg.protocol !== 'http:') fail(`PG_URL must be an http:// URL, got ${JSON.stringify(pgRaw)}`);
  if (!isLoopback(pg.hostname)) {
    fail(`PG_URL must point at a loopback address (127.0.0.0/8, ::1 or localhost), got host ${JSON.stringify(pg.hostname)}`);
  }
  if (pg.username || pg.password || pg.search || pg.hash) fail('PG_URL must be a bare base URL (no credentials, query or fragment)');

  const vendorTimeoutMs = int('VENDOR_TIMEOUT_MS', profile.vendorTimeoutMs, 1, 600000);
  return {
    profile: profileName,
    port,
    metricsPort,
    pgHost: pg.hostname.replace(/^\[|\]$/g, ''),
    pgPort: Number(pg.port) || 80,
    approvePath: pg.pathname.replace(/\/+$/, '') + APPROVE_PATH,
    pgUrl: pg.origin + pg.pathname.replace(/\/+$/, ''),
    maxConcurrency: int('MAX_CONCURRENCY', 50, 1, 100000),
    verifyConcurrency: int('VERIFY_CONCURRENCY', 20, 1, 100000),
    separated: profile.separated,
    maxQueue: int('MAX_QUEUE', 10000, 0, 1000000),
    vendorTimeoutMs,
    retries: int('RETRIES', profile.retries, 0, 10),
    retryBackoffMs: int('RETRY_BACKOFF_MS', 0, 0, 60000),
    breaker: bool('BREAKER', profile.breaker),
    cb: {
      timeout: int('CB_TIMEOUT_MS', 5000, 1, 600000),
      errorThresholdPercentage: int('CB_ERROR_THRESHOLD', 50, 0, 100),
      resetTimeout: int('CB_RESET_TIMEOUT_MS', 30000, 1, 3600000),
      volumeThreshold: int('CB_VOLUME_THRESHOLD', 20, 0, 1000000),
      rollingCountTimeout: int('CB_ROLLING_COUNT_TIMEOUT_MS', 10000, 10, 3600000),
      rollingCountBuckets: int('CB_ROLLING_COUNT_BUCKETS', 10, 1, 1000)
    }
  };
}

function isLoopback (hostname) {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  return Boolean(m && Number(m[1]) === 127 && m.slice(2).every((x) => Number(x) <= 255));
}

const cfg = loadConfig();

// ----------------------------------------------------------------- metrics

const registry = new promClient.Registry();
promClient.collectDefaultMetrics({ register: registry });

const inFlight = new promClient.Gauge({
  name: 'http_requests_in_flight',
  help: 'Requests holding a slot of a concurrency cap (busy workers)',
  labelNames: ['pool'],
  registers: [registry]
});
const queued = new promClient.Gauge({
  name: 'http_requests_queued',
  help: 'Requests waiting for a slot of a concurrency cap',
  labelNames: ['pool'],
  registers: [registry]
});
const maxConcurrency = new promClient.Gauge({
  name: 'http_max_concurrency',
  help: 'Size of the concurrency cap (max workers)',
  labelNames: ['pool'],
  registers: [registry]
});
const abandoned = new promClient.Counter({
  name: 'http_requests_abandoned_total',
  help: 'Requests whose client left while they waited for a slot',
  labelNames: ['pool'],
  registers: [registry]
});
const overloaded = new promClient.Counter({
  name: 'http_requests_overloaded_total',
  help: 'Requests refused with 503 because the wait queue was full (MAX_QUEUE)',
  labelNames: ['pool'],
  registers: [registry]
});
const requests = new promClient.Counter({
  name: 'http_requests_total',
  help: 'Answered requests by route and status code',
  labelNames: ['route', 'code'],
  registers: [registry]
});
const vendorCalls = new promClient.Counter({
  name: 'vendor_calls_total',
  help: 'HTTP calls that reached the vendor, by outcome',
  labelNames: ['outcome'],
  registers: [registry]
});
const vendorRetries = new promClient.Counter({
  name: 'vendor_retries_total',
  help: 'Extra vendor attempts made by the retry policy',
  registers: [registry]
});
const vendorFallback = new promClient.Counter({
  name: 'vendor_fallback_total',
  help: 'Verifications answered 503 VENDOR_OPEN by the breaker fallback',
  registers: [registry]
});
for (const o of ['success', 'client_error', 'server_error', 'timeout', 'error']) vendorCalls.labels(o).inc(0);
vendorFallback.inc(0);
vendorRetries.inc(0);

// -------------------------------------------------------- concurrency caps

class Pool {
  constructor (name, size) {
    this.name = name;
    this.size = size;
    this.busy = 0;
    this.waiters = [];
    maxConcurrency.labels(name).set(size);
    inFlight.labels(name).set(0);
    queued.labels(name).set(0);
    abandoned.labels(name).inc(0);
    overloaded.labels(name).inc(0);
  }

  // Resolves true once a slot is held, false if the client left or the queue
  // is full (the caller then answers or drops the request).
  acquire (res) {
    if (this.busy < this.size) {
      this._take();
      return Promise.resolve(true);
    }
    if (this.waiters.length >= cfg.maxQueue) {
      overloaded.labels(this.name).inc();
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      const waiter = { resolve, res };
      waiter.onClose = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) {
          this.waiters.splice(i, 1);
          queued.labels(this.name).set(this.waiters.length);
          abandoned.labels(this.name).inc();
          resolve(false);
        }
      };
      res.once('close', waiter.onClose);
      this.waiters.push(waiter);
      queued.labels(this.name).set(this.waiters.length);
    });
  }

  release () {
    this.busy--;
    inFlight.labels(this.name).set(this.busy);
    while (this.busy < this.size && this.waiters.length) {
      const w = this.waiters.shift();
      w.res.removeListener('close', w.onClose);
      this._take();
      w.resolve(true);
    }
    queued.labels(this.name).set(this.waiters.length);
  }

  _take () {
    this.busy++;
    inFlight.labels(this.name).set(this.busy);
  }
}

const sharedPool = new Pool('shared', cfg.maxConcurrency);
const verifyPool = cfg.separated ? new Pool('verify', cfg.verifyConcurrency) : sharedPool;

// ------------------------------------------------------------- vendor call

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

class VendorError extends Error {
  constructor (message, code, status) {
    super(message);
    this.code = code; // ETIMEDOUT | EVENDOR5XX | EVENDOR4XX | ECONN
    this.status = status;
  }
}

// One HTTP attempt. `call.abort` is set so the breaker's timeout can cut the
// socket (opossum itself only stops waiting; it does not cancel the action).
function vendorAttempt (call) {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err, value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      call.abort = null;
      if (err) {
        vendorCalls.labels({
          ETIMEDOUT: 'timeout', EVENDOR5XX: 'server_error', EVENDOR4XX: 'client_error'
        }[err.code] || 'error').inc();
        reject(err);
      } else {
        vendorCalls.labels('success').inc();
        resolve(value);
      }
    };
    const headers = {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(call.body),
      'Idempotency-Key': call.key
    };
    if (call.faultHeader !== undefined) headers['X-Harness-Fault'] = call.faultHeader;
    const req = http.request({
      host: cfg.pgHost, port: cfg.pgPort, path: cfg.approvePath, method: 'POST', agent, headers
    }, (vres) => {
      const status = vres.statusCode;
      vres.resume(); // drain: the whole answer must arrive within the timeout
      vres.on('error', (e) => finish(new VendorError(`vendor answer broke: ${e.message}`, 'ECONN')));
      vres.on('aborted', () => finish(new VendorError('vendor answer aborted', 'ECONN')));
      vres.on('end', () => {
        if (status >= 200 && status < 300) finish(null, { status });
        else if (status >= 400 && status < 500) finish(new VendorError(`vendor answered ${status}`, 'EVENDOR4XX', status));
        else finish(new VendorError(`vendor answered ${status}`, 'EVENDOR5XX', status));
      });
    });
    const timer = setTimeout(() => {
      finish(new VendorError(`vendor timed out after ${cfg.vendorTimeoutMs} ms`, 'ETIMEDOUT'));
      req.destroy();
    }, cfg.vendorTimeoutMs);
    call.abort = () => {
      finish(new VendorError('vendor call cut by the breaker timeout', 'ETIMEDOUT'));
      req.destroy();
    };
    req.on('error', (e) => finish(new VendorError(`vendor connection failed: ${e.code || e.message}`, 'ECONN')));
    req.end(call.body);
  });
}

let breaker = null;
let breakerMetrics = null;
if (cfg.breaker) {
  breaker = new CircuitBreaker(vendorAttempt, {
    name: BREAKER_NAME,
    timeout: cfg.cb.timeout,
    errorThresholdPercentage: cfg.cb.errorThresholdPercentage,
    resetTimeout: cfg.cb.resetTimeout,
    volumeThreshold: cfg.cb.volumeThreshold,
    rollingCountTimeout: cfg.cb.rollingCountTimeout,
    rollingCountBuckets: cfg.cb.rollingCountBuckets,
    // Business rejections (vendor 4xx) are answers, not vendor failures.
    // opossum counts a filtered error as a 'success' event and rejects the
    // fire() promise with it, without calling the fallback.
    errorFilter: (err) => err instanceof VendorError && err.code === 'EVENDOR4XX'
  });
  // opossum calls the fallback on every unfiltered failure too (timeouts,
  // 5xx). Only a breaker refusal becomes VENDOR_OPEN; other failures are
  // rethrown synchronously, so opossum emits no 'fallback' event for them and
  // the caller still answers 502/504.
  breaker.fallback((call, err) => {
    if (err && err.code === 'EOPENBREAKER') {
      vendorFallback.inc();
      return { vendorOpen: true };
    }
    throw err;
  });
  breaker.on('timeout', (err, latency, args) => {
    const call = args && args[0];
    if (call && call.abort) call.abort();
  });
  new promClient.Gauge({ // eslint-disable-line no-new
    name: 'circuit_state',
    help: '1 for the breaker\'s current state (closed, open, half_open)',
    labelNames: ['name', 'state'],
    registers: [registry],
    collect () {
      const now = breaker.opened ? 'open' : breaker.halfOpen ? 'half_open' : 'closed';
      for (const s of ['closed', 'open', 'half_open']) this.labels(BREAKER_NAME, s).set(s === now ? 1 : 0);
    }
  });
  // opossum-prometheus subscribes only to events that already have a listener
  // (circuit.eventNames()); opossum itself listens to most but not to
  // 'halfOpen', so register these before creating the metrics.
  breaker.on('halfOpen', () => log(`breaker ${BREAKER_NAME}: half-open`));
  breaker.on('open', () => log(`breaker ${BREAKER_NAME}: open`));
  breaker.on('close', () => log(`breaker ${BREAKER_NAME}: closed`));
  breakerMetrics = new PrometheusMetrics({ circuits: [breaker], registry });
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Returns { vendorOpen } or throws a VendorError / opossum error.
async function callVendor (call) {
  const attempts = cfg.retries + 1;
  for (let attempt = 1; ; attempt++) {
    try {
      return breaker ? await breaker.fire(call) : await vendorAttempt(call);
    } catch (err) {
      // Timeouts (ours or the breaker's), 5xx and connection errors are
      // retried; business 4xx and breaker refusals are not.
      const retryable = ['ETIMEDOUT', 'EVENDOR5XX', 'ECONN'].includes(err && err.code);
      if (!retryable || attempt >= attempts) throw err;
      vendorRetries.inc();
      if (cfg.retryBackoffMs > 0) await sleep(cfg.retryBackoffMs);
    }
  }
}

// ------------------------------------------------------------------ server

function log (message) {
  process.stderr.write(`${new Date().toISOString()} node-gateway: ${message}\n`);
}

function send (res, route, code, obj) {
  requests.labels(route, String(code)).inc();
  if (res.destroyed || res.writableEnded) return;
  const body = JSON.stringify(obj);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function readBody (req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function withSlot (pool, res, route, handler) {
  const ok = await pool.acquire(res);
  if (!ok) {
    if (!res.destroyed && !res.writableEnded) send(res, route, 503, { status: 'OVERLOADED' });
    return;
  }
  try {
    await handler();
  } finally {
    pool.release();
  }
}

async function verify (req, res, route) {
  let body;
  try {
    body = await readBody(req);
  } catch (e) {
    return send(res, route, 413, { status: 'BAD_REQUEST', error: e.message });
  }
  if (body.trim() === '') body = '{}';
  try {
    JSON.parse(body);
  } catch (e) {
    return send(res, route, 400, { status: 'BAD_REQUEST', error: 'body is not JSON' });
  }
  const key = req.headers['idempotency-key'] || crypto.randomUUID();
  const call = { body, key, faultHeader: req.headers['x-harness-fault'], abort: null };
  await withSlot(verifyPool, res, route, async () => {
    try {
      const result = await callVendor(call);
      if (result && result.vendorOpen) {
        send(res, route, 503, { status: 'VENDOR_OPEN', retryAfterSec: Math.ceil(cfg.cb.resetTimeout / 1000) });
      } else {
        send(res, route, 200, { status: 'VERIFIED' });
      }
    } catch (err) {
      if (err.code === 'EOPENBREAKER') send(res, route, 503, { status: 'VENDOR_OPEN' });
      else if (err.code === 'ETIMEDOUT') send(res, route, 504, { status: 'VENDOR_TIMEOUT' });
      else if (err.code === 'EVENDOR4XX') send(res, route, 422, { status: 'REJECTED', vendorStatus: err.status });
      else if (err.code === 'EVENDOR5XX') send(res, route, 502, { status: 'VENDOR_ERROR', vendorStatus: err.status });
      else send(res, route, 502, { status: 'VENDOR_ERROR', error: err.message });
    }
  });
}

async function serveMetrics (res) {
  try {
    const text = await registry.metrics();
    res.writeHead(200, { 'Content-Type': registry.contentType });
    res.end(text);
  } catch (e) {
    res.writeHead(500, { 'Content-Type': 'text/plain' });
    res.end(`metrics failed: ${e.message}\n`);
  }
}

function health (res) {
  const body = JSON.stringify({
    status: 'UP',
    profile: cfg.profile,
    breaker: breaker ? (breaker.opened ? 'open' : breaker.halfOpen ? 'half_open' : 'closed') : 'none'
  });
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const PRODUCT_RE = /^\/api\/products\/([^/]+)$/;

function route (req, res) {
  const path = (req.url || '/').split('?')[0];
  const method = req.method;
  if (path === '/health') return method === 'GET' ? health(res) : send(res, 'health', 405, { status: 'METHOD_NOT_ALLOWED' });
  if (path === '/metrics') return method === 'GET' ? serveMetrics(res) : send(res, 'metrics', 405, { status: 'METHOD_NOT_ALLOWED' });
  if (path === '/api/verify' || path === '/api/payments') {
    const name = path.slice(5);
    if (method !== 'POST') return send(res, name, 405, { status: 'METHOD_NOT_ALLOWED' });
    return verify(req, res, name).catch((e) => send(res, name, 500, { status: 'ERROR', error: e.message }));
  }
  if (path === '/api/cart') {
    if (method !== 'GET') return send(res, 'cart', 405, { status: 'METHOD_NOT_ALLOWED' });
    req.resume();
    return withSlot(sharedPool, res, 'cart', async () => {
      send(res, 'cart', 200, { items: [{ productId: 1, qty: 2 }], total: 30000 });
    });
  }
  const m = PRODUCT_RE.exec(path);
  if (m) {
    if (method !== 'GET') return send(res, 'products', 405, { status: 'METHOD_NOT_ALLOWED' });
    req.resume();
    const id = decodeURIComponent(m[1]);
    return withSlot(sharedPool, res, 'products', async () => {
      send(res, 'products', 200, { id, name: `product ${id}`, price: 15000 });
    });
  }
  req.resume();
  return send(res, 'other', 404, { status: 'NOT_FOUND' });
}

const server = http.createServer(route);
server.keepAliveTimeout = 65000;
server.headersTimeout = 66000;
server.requestTimeout = 0; // queued requests may wait longer than Node's default 300 s

const metricsServer = cfg.metricsPort === null ? null : http.createServer((req, res) => {
  const path = (req.url || '/').split('?')[0];
  req.resume();
  if (req.method === 'GET' && path === '/metrics') return serveMetrics(res);
  if (req.method === 'GET' && path === '/health') return health(res);
  res.writeHead(404, { 'Content-Type': 'text/plain' });
  res.end('not found\n');
});

function listen (srv, port, what) {
  return new Promise((resolve) => {
    srv.once('error', (e) => {
      process.stderr.write(`node-gateway: cannot listen on 127.0.0.1:${port} (${what}): ${e.code || e.message}\n`);
      process.exit(3);
    });
    srv.listen(port, '127.0.0.1', () => resolve(srv.address().port));
  });
}

async function main () {
  const port = await listen(server, cfg.port, 'service');
  const mport = metricsServer ? await listen(metricsServer, cfg.metricsPort, 'metrics') : null;
  const cap = cfg.separated
    ? `shared cap ${cfg.maxConcurrency}, verify cap ${cfg.verifyConcurrency}`
    : `shared cap ${cfg.maxConcurrency}`;
  const br = breaker
    ? `breaker timeout ${cfg.cb.timeout} ms, threshold ${cfg.cb.errorThresholdPercentage}%, reset ${cfg.cb.resetTimeout} ms, volume ${cfg.cb.volumeThreshold}`
    : 'no breaker';
  log(`profile ${cfg.profile} on http://127.0.0.1:${port}` +
    (mport ? ` (metrics also on http://127.0.0.1:${mport}/metrics)` : '') +
    `; vendor ${cfg.pgUrl}${APPROVE_PATH}, timeout ${cfg.vendorTimeoutMs} ms, retries ${cfg.retries}; ${cap}; ${br}`);
}

let stopping = false;
function shutdown (signal) {
  if (stopping) return;
  stopping = true;
  log(`${signal}: shutting down`);
  const force = setTimeout(() => {
    server.closeAllConnections();
    if (metricsServer) metricsServer.closeAllConnections();
    agent.destroy();
    process.exit(0);
  }, SHUTDOWN_GRACE_MS);
  force.unref();
  let open = metricsServer ? 2 : 1;
  const closed = () => {
    if (--open === 0) {
      clearTimeout(force);
      agent.destroy();
      process.exit(0);
    }
  };
  if (breaker) breaker.shutdown();
  if (breakerMetrics) clearInterval(breakerMetrics.interval);
  server.close(closed);
  server.closeIdleConnections();
  if (metricsServer) {
    metricsServer.close(closed);
    metricsServer.closeIdleConnections();
  }
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

main();
