// Capture /metrics text of a *stock* opossum service: opossum 9 and opossum-prometheus 0.3.0
// with no listener of its own (targets/node-gateway registers them; most services do not).
//
// Writes opossum_stock_{1,2,3,4}.txt: a breaker whose every call fails, scraped after each of
// four calls 300 ms apart (resetTimeout 200 ms, so calls 2-4 are failed half-open probes).
// opossum-prometheus counts only events that have a listener when it is created, and opossum
// has none for halfOpen: the captures count four opens and no halfOpen.
//
// Run from the repository root, after `npm ci` in targets/node-gateway:
//   NODE_PATH=targets/node-gateway/node_modules node tests/data/capture_opossum_stock.js
'use strict';
const fs = require('fs');
const path = require('path');
const CircuitBreaker = require('opossum');
const PrometheusMetrics = require('opossum-prometheus');
const promClient = require('prom-client');

const versions = ['opossum', 'opossum-prometheus', 'prom-client']
  .map((name) => `${name} ${require(`${name}/package.json`).version}`).join(', ');
const registry = new promClient.Registry();
const breaker = new CircuitBreaker(async () => { throw new Error('vendor down'); },
  { name: 'vendor', resetTimeout: 200, volumeThreshold: 1, errorThresholdPercentage: 50 });
new PrometheusMetrics({ circuits: [breaker], registry }); // eslint-disable-line no-new
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

(async () => {
  for (let i = 1; i <= 4; i++) {
    await breaker.fire().catch(() => {});
    await sleep(300);
    const head = `# captured by tests/data/capture_opossum_stock.js (${versions}): ` +
      `a stock breaker after failed call ${i} of 4, no listener registered\n`;
    fs.writeFileSync(path.join(__dirname, `opossum_stock_${i}.txt`), head + await registry.metrics());
  }
})();
