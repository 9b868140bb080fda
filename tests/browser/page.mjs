// The web status page in a real browser (Debian's chromium, driven by
// playwright-core). Run by cli/tests/browser.rs, which owns the hub and the
// simulated clusters and acts on requests this script prints on stdout:
//   CHANGE <cluster> [<gateway>]  make a change on that cluster, answer DONE
//   STOP <cluster>                stop that cluster's agent, answer DONE
// Usage: node page.mjs <page url> <artifacts dir> test|bench [gateways]
// Needs GWHUB_NODE_MODULES (scripts/browser.sh prints its parent).
import { createRequire } from 'node:module';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const require = createRequire(join(process.env.GWHUB_NODE_MODULES, 'x.js'));
const { chromium } = require('playwright-core');

const [url, artifacts, mode = 'test', expectGateways = '0'] = process.argv.slice(2);
mkdirSync(artifacts, { recursive: true });

const answers = createInterface({ input: process.stdin });
const pending = [];
answers.on('line', (l) => { const r = pending.shift(); if (r) r(l); });
function ask(request) {
  return new Promise((resolve) => { pending.push(resolve); console.log(request); });
}

function check(ok, what) {
  if (!ok) throw new Error('FAILED: ' + what);
  console.log('ok - ' + what);
}

// A fresh profile each run (Playwright passes it as --user-data-dir).
const userDataDir = mkdtempSync(join(tmpdir(), 'gwhub-chromium-'));
const browser = await chromium.launchPersistentContext(userDataDir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  viewport: { width: 1400, height: 1000 },
});
let exit = 0;
try {
  const page = browser.pages()[0] || await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  if (mode === 'bench') {
    await bench(page, Number(expectGateways));
  } else if (mode === 'scale') {
    await scale(page);
  } else {
    await test(page);
  }
  check(errors.length === 0, 'no script errors on the page ' + JSON.stringify(errors));
  console.log('PASS');
} catch (e) {
  console.log(String(e && e.stack || e));
  exit = 1;
} finally {
  await browser.close();
  rmSync(userDataDir, { recursive: true, force: true });
  answers.close();
}
process.exit(exit);

async function test(page) {
  const DEFAULT = 'tr[data-gateway="openshift-ingress/default-gateway"]';
  const INTERNAL = 'tr[data-gateway="openshift-ingress/internal"]';
  await page.goto(url);
  // 1. The demo's Gateways and clusters.
  await page.waitForSelector(DEFAULT);
  await page.waitForSelector(INTERNAL);
  await page.waitForSelector('#live.on');
  const clusters = await page.$$eval('#overview thead th[data-cluster]', (ths) => ths.map((t) => t.dataset.cluster));
  check(JSON.stringify(clusters) === JSON.stringify(['central', 'cluster-4', 'east', 'west']), 'the clusters are the columns: ' + clusters);
  await page.waitForSelector('#causes-none:not(.hidden)');
  check(true, 'no problem while every cluster is ready');
  await page.waitForSelector(DEFAULT + ' td[data-cluster="east"][data-health="ready"]');
  check(await page.$(INTERNAL + ' td[data-cluster="central"].missing') !== null, 'central does not report internal');
  // Fleet DNS (the hub's dry run from the reports): the wildcard name
  // holds every cluster's address, each cluster eligible.
  const DNS = '#dns-names tr[data-host="*.gwapi.apps.demo.example.com"]';
  const ALL = ['203.0.113.10', '203.0.113.11', '203.0.113.12', '203.0.113.13'];
  await page.waitForFunction(([row, all]) => {
    const td = document.querySelector(row + ' td.published');
    return td && all.every((ip) => td.textContent.includes(ip));
  }, [DNS, ALL], { timeout: 10000 });
  check((await page.$$(DNS + ' .chip[data-eligible="true"]')).length === 4, 'fleet DNS: every cluster eligible, all four addresses published');
  check((await page.textContent('#dns-summary')).includes('dry run'), 'fleet DNS says it is a dry run');
  await page.screenshot({ path: join(artifacts, '1-overview.png'), fullPage: true });

  // 2. A change on a simulated cluster shows within 2 s, without reload.
  const navigations = [];
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations.push(f.url()); });
  const t0 = Date.now();
  await ask('CHANGE east');
  await page.waitForSelector(DEFAULT + ' td[data-cluster="east"][data-health="not-ready"]', { timeout: 2000 });
  const ms = Date.now() - t0;
  check(ms <= 2000, 'east losing its load balancer shows on the page in ' + ms + ' ms');
  check(navigations.length === 0, 'no reload');
  await page.waitForSelector(DEFAULT + ' .badge.not-ready');
  // Fleet DNS follows: east leaves the record, saying why.
  await page.waitForFunction((row) => {
    const td = document.querySelector(row + ' td.published');
    return td && !td.textContent.includes('203.0.113.10') && td.textContent.includes('203.0.113.11');
  }, DNS, { timeout: 10000 });
  const eastChip = await page.textContent(DNS + ' .chip[data-cluster="east"][data-eligible="false"]');
  check(eastChip.includes('rule 2 LoadBalancerNotReady'), 'fleet DNS: east left out, ' + eastChip);
  await page.screenshot({ path: join(artifacts, '1a-dns.png'), fullPage: true });

  // Two clusters failing the same way are one cause, with both clusters.
  await ask('CHANGE cluster-4');
  const CAUSE = '#cause-list li.cause[data-reason="SyncLoadBalancerFailed"]';
  await page.waitForSelector(CAUSE + '[data-cluster-count="2"]', { timeout: 10000 });
  const members = await page.$$eval(CAUSE + ' .chip', (cs) => cs.map((c) => c.dataset.cluster));
  check(JSON.stringify(members) === '["cluster-4","east"]', 'one cause, two clusters: ' + members);
  check((await page.getAttribute(CAUSE, 'data-type')) === 'LoadBalancerReady', 'the cause names the condition type');
  check((await page.$$(CAUSE)).length === 1, 'the cluster names and addresses in the message do not split the cause');
  check((await page.textContent('#cause-list li.cause:first-child')).includes('2 clusters'), 'the largest cause comes first');
  await page.screenshot({ path: join(artifacts, '1b-causes.png'), fullPage: true });
  // Choosing it narrows the cluster axis to its clusters.
  await page.click(CAUSE + ' .head');
  await page.waitForFunction(() => document.querySelectorAll('#overview thead th[data-cluster]').length === 2);
  const narrowed = await page.$$eval('#overview thead th[data-cluster]', (ths) => ths.map((t) => t.dataset.cluster));
  check(JSON.stringify(narrowed) === '["cluster-4","east"]', 'a chosen cause keeps its clusters\' columns: ' + narrowed);
  check(page.url().includes('cause='), 'the chosen cause is in the address');
  await page.click('#cause-clear');
  await page.waitForFunction(() => document.querySelectorAll('#overview thead th[data-cluster]').length === 4);
  // The search narrows the cluster list (and the columns); sorting by
  // problems puts the failing clusters first.
  await page.fill('#cl-search', 'ea');
  await page.waitForFunction(() => document.querySelectorAll('#cluster-list tbody tr[data-cluster]').length === 1);
  const found = await page.$$eval('#cluster-list tbody tr[data-cluster]', (trs) => trs.map((t) => t.dataset.cluster));
  check(JSON.stringify(found) === '["east"]', 'the search narrows the cluster list: ' + found);
  check(JSON.stringify(await page.$$eval('#overview thead th[data-cluster]', (ths) => ths.map((t) => t.dataset.cluster))) === '["east"]',
    'and the overview columns');
  await page.fill('#cl-search', '');
  await page.selectOption('#cl-sort', 'problems');
  await page.waitForFunction(() => document.querySelectorAll('#cluster-list tbody tr[data-cluster]').length === 4);
  const sorted = await page.$$eval('#cluster-list tbody tr[data-cluster]', (trs) => trs.map((t) => t.dataset.cluster));
  check(JSON.stringify(sorted.slice(0, 2).sort()) === '["cluster-4","east"]', 'sorted by problems: ' + sorted);
  await page.selectOption('#cl-group', 'cause');
  await page.waitForSelector('#cluster-list tbody tr.group');
  const groupText = (await page.$$eval('#cluster-list tbody tr.group', (trs) => trs.map((t) => t.textContent)))
    .find((t) => t.includes('LoadBalancerReady SyncLoadBalancerFailed')) || '';
  check(groupText.includes('(2)'), 'grouped by cause: ' + groupText);
  await page.selectOption('#cl-group', '');
  await page.selectOption('#cl-sort', 'name');

  // Drill into the hub Gateway: aggregated conditions, each cluster's own
  // report, the transition just made.
  await page.click(DEFAULT + ' td.gw');
  await page.waitForSelector('#details:not(.hidden) #d-reports .report[data-cluster="east"]');
  const conds = await page.textContent('#d-conditions');
  check(conds.includes('LoadBalancerReady') && conds.includes('NotTrueInSomeClusters'), 'aggregated conditions are shown');
  const addresses = await page.textContent('#d-addresses');
  check(addresses.includes('west/203.0.113.11'), 'aggregated addresses are shown: ' + addresses);
  check((await page.textContent('#d-listeners')).includes('east.apps-http'), 'listeners are shown');
  await page.waitForFunction(() => [...document.querySelectorAll('#d-history tr')]
    .some((tr) => tr.textContent.includes('east') && tr.textContent.includes('LoadBalancerReady') && tr.textContent.includes('False')));
  check(true, 'the history shows east LoadBalancerReady turning False');
  await page.screenshot({ path: join(artifacts, '2-details.png'), fullPage: true });

  // 3. Filters narrow the view.
  await page.check('#f-not-ready');
  await page.waitForSelector(INTERNAL, { state: 'detached' });
  check(await page.$(DEFAULT) !== null, 'not ready: only default-gateway is left');
  check(page.url().includes('not_ready=1'), 'the filter is in the address');
  await page.uncheck('#f-not-ready');
  await page.waitForSelector(INTERNAL);
  await page.selectOption('#f-cluster', 'central');
  await page.waitForSelector(INTERNAL, { state: 'detached' });
  const cols = await page.$$eval('#overview thead th[data-cluster]', (ths) => ths.map((t) => t.dataset.cluster));
  check(JSON.stringify(cols) === '["central"]', 'cluster filter: one column, Gateways of central only');
  await page.selectOption('#f-cluster', '');
  await page.waitForSelector(INTERNAL);
  await page.selectOption('#f-namespace', 'openshift-ingress');
  await page.waitForSelector(INTERNAL);
  check((await page.$$('#overview tbody tr')).length === 2, 'namespace filter keeps both demo Gateways');
  await page.selectOption('#f-namespace', '');

  // 4. A cluster that goes silent is marked stale.
  await ask('STOP central');
  await page.waitForSelector('#overview thead th[data-cluster="central"].stale', { timeout: 30000 });
  await page.waitForSelector(DEFAULT + ' td[data-cluster="central"].stale');
  check(true, 'central is marked stale in its column and its cell');
  await page.waitForSelector('#cause-list li.cause[data-kind="stale"] .chip[data-cluster="central"]', { timeout: 10000 });
  check(true, 'a stale cluster is a cause too');
  await page.click(INTERNAL + ' td.gw');
  await page.click(DEFAULT + ' td.gw');
  await page.waitForSelector('#d-reports .report.stale[data-cluster="central"]');
  check(true, 'its report is marked stale in the details');
  await page.screenshot({ path: join(artifacts, 'web-page-full.png'), fullPage: true });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(artifacts, 'web-page.png') });
}

// 120 clusters, 37 failing with the same quota message in their own words
// (cli/tests/browser.rs the_page_groups_a_fleet_by_cause).
async function scale(page) {
  await page.goto(url);
  await page.waitForFunction(() => document.querySelectorAll('#overview td.summary').length === 3);
  check((await page.$$('#overview thead th[data-cluster]')).length === 0, 'no column per cluster at 120 clusters');
  const bar = await page.$eval('tr[data-gateway="openshift-ingress/gw-0"] td.summary', (td) => [td.dataset.ready, td.dataset.notReady]);
  check(JSON.stringify(bar) === '["83","37"]', 'gw-0 sums up 83 ready and 37 not ready clusters: ' + bar);
  const CAUSE = '#cause-list li.cause:first-child';
  await page.waitForSelector(CAUSE + '[data-reason="SyncLoadBalancerFailed"][data-cluster-count="37"]');
  check((await page.$$('#cause-list li.cause[data-kind="condition"]')).length === 1, 'the 37 messages are one cause');
  // 120 clusters' addresses are past the CRD's limit: the hub's own cause
  // says why every hub Gateway is not ready although its clusters are.
  check(await page.$('#cause-list li.cause[data-kind="hub"][data-reason="ValidationFailed"][data-gateway-count="3"]') !== null,
    'the hub\'s own problem (addresses left out) is a cause of its 3 hub Gateways');
  check((await page.$$(CAUSE + ' .chip')).length === 12, 'twelve of its clusters are named');
  await page.screenshot({ path: join(artifacts, 'scale.png') });
  await page.click(CAUSE + ' button.more-clusters');
  check((await page.$$(CAUSE + ' .chip')).length === 37, 'and the other 25 on request');
  await page.fill('#cl-search', 'c-00');
  await page.waitForFunction(() => document.querySelectorAll('#cluster-list tbody tr[data-cluster]').length === 10);
  check((await page.$$('#overview thead th[data-cluster]')).length === 10, 'a search narrow enough brings the columns back');
  await page.fill('#cl-search', '');
  await page.click(CAUSE + ' .head');
  await page.waitForFunction(() => document.querySelectorAll('#overview thead th[data-cluster]').length === 37);
  check((await page.$$('#overview td.cell.not-ready')).length === 37, 'the chosen cause: its 37 clusters as columns');
  await page.screenshot({ path: join(artifacts, 'scale-cause.png') });
}

// Page load and update latency at scale: figures, not assertions. Past
// the page's column limit a change shows in its hub Gateway's summary bar
// (the not-ready count), not in a cell of its own.
async function bench(page, gateways) {
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForFunction((n) => document.querySelectorAll('#overview tbody tr').length === n,
    gateways, { timeout: 120000, polling: 50 });
  const load = Date.now() - t0;
  await page.waitForFunction(() => window.gwhub.causesLoaded > 0, null, { timeout: 60000, polling: 50 });
  const causesLoad = Date.now() - t0;
  const cells = await page.$$eval('#overview td.cell', (tds) => tds.length);
  const summaries = await page.$$eval('#overview td.summary', (tds) => tds.length);
  const first = await page.evaluate(() => window.gwhub.firstSnapshot);
  console.log('FIGURE load_ms ' + load + ' rows ' + gateways + ' cells ' + cells + ' summaries ' + summaries
    + ' causes_loaded_ms ' + causesLoad
    + ' snapshot_received_ms ' + Math.round(first.at) + ' drawn_ms ' + Math.round(first.drawn)
    + ' snapshot_bytes ' + first.bytes);
  const notReady = () => page.$$eval('#overview td.summary', (tds) => Object.fromEntries(
    tds.map((td) => [td.parentElement.dataset.gateway, Number(td.dataset.notReady)])));
  const times = [];
  const causeTimes = [];
  for (let i = 0; i < 10; i++) {
    const before = summaries ? await notReady() : {};
    const start = Date.now();
    const reply = await ask('CHANGE ' + i);   // answer: "<gateway key> <cluster> <health>"
    const [key, cluster, health] = reply.split(' ');
    if (summaries) {
      await page.waitForFunction(([k, n]) => {
        const td = document.querySelector('tr[data-gateway="' + k + '"] td.summary');
        return td && Number(td.dataset.notReady) > n;
      }, [key, before[key] || 0], { timeout: 60000, polling: 20 });
    } else {
      const sel = 'tr[data-gateway="' + key + '"] td[data-cluster="' + cluster + '"][data-health="' + health + '"]';
      await page.waitForSelector(sel, { timeout: 60000, state: 'attached' });
    }
    times.push(Date.now() - start);
    // The same change in the causes: one more cluster with Programmed Pending.
    await page.waitForSelector('#cause-list li.cause[data-reason="Pending"][data-cluster-count="' + (i + 1) + '"]',
      { timeout: 60000, state: 'attached' });
    causeTimes.push(Date.now() - start);
  }
  times.sort((a, b) => a - b);
  causeTimes.sort((a, b) => a - b);
  console.log('FIGURE update_ms ' + times.join(','));
  console.log('FIGURE cause_update_ms ' + causeTimes.join(',')
    + ' causes_fetch_ms ' + Math.round(await page.evaluate(() => window.gwhub.causesMs)));
  await page.screenshot({ path: join(artifacts, 'bench-' + gateways + '.png') });
}
