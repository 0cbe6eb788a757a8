import { createServer } from 'node:http';
import { cordon, enroll, freshDataDir, launchBrowser, live, operatorPage, removeDir, startCordon, agentApi } from './helpers.js';
import { startSite } from './site.js';
const answers = [
  "Thought: The pad takes the whole page; I click its middle to see what happens.\nAction: click(start_box='<|box_start|>(644,364)<|box_end|>')",
  "Thought: The title says clicked 1. I click once more to be sure it counts.\nAction: click(start_box='(300,200)')",
  "Thought: It counts clicks. Done.\nAction: finished(content='The pad counted 2 clicks.')",
];
let i = 0;
const model = createServer((req, res) => {
  let body = ''; req.on('data', (c) => { body += c; });
  req.on('end', () => {
    const text = answers[Math.min(i++, answers.length - 1)];
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: text } }], usage: { prompt_tokens: 1850, completion_tokens: 42 } }));
  });
});
await new Promise((r) => model.listen(0, '127.0.0.1', r));
const site = await startSite();
const dataDir = freshDataDir();
cordon(dataDir, ['tenant', 'create', 'acme', '--name', 'Acme Corp']);
const key = cordon(dataDir, ['apikey', 'create', '--tenant', 'acme', '--label', 'e2e']).trim();
const server = await startCordon(dataDir, { CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}`, CORDON_MODEL_BASE_URL: `http://127.0.0.1:${model.address().port}/v1` });
const r = await agentApi(server.url, key, 'POST', '/api/tasks', { instruction: 'Find out what the pad does when clicked and report it.', start_url: site.url('/pad'), record: 'audit' });
console.log(JSON.stringify(r.json));
const browser = await launchBrowser();
const { page } = await operatorPage(browser);
await page.setViewportSize({ width: 1280, height: 800 });
await enroll(page, server.enrollLink, server.url);
await page.goto(`${server.url}/tasks/${r.json.task_id}`);
await live(page);
await page.waitForSelector('#trace img');
await new Promise((r) => setTimeout(r, 1500));
await page.screenshot({ path: '/tmp/shot-trace-1280.png', fullPage: true });
await page.setViewportSize({ width: 390, height: 844 });
await page.screenshot({ path: '/tmp/shot-trace-390.png', fullPage: true });
await page.setViewportSize({ width: 1280, height: 800 });
await page.goto(`${server.url}/sessions/${r.json.session_id}`);
await live(page);
await page.screenshot({ path: '/tmp/shot-session-tasks.png', fullPage: true });
await browser.close(); await server.stop(); await site.stop(); model.close(); removeDir(dataDir);
