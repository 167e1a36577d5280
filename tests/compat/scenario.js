'use strict';
/*
 * One phase of the ali-ons compatibility scenario, run by tests/compat/test_ali_ons.py.
 *
 *   node scenario.js '<json>'      ->  one JSON object on stdout (client logs go to stderr)
 *
 * The JSON argument names the phase and its parameters:
 *   {"phase": "produce", "namesrv": "127.0.0.1:port", "topic": T, "messages": [
 *        {"key": k, "tag": t, "body": b, "repeat": n?, "shardingKey": s?, "delayLevel": n?}, ...]}
 *     (the body sent is b repeated n times; ali-ons deflates bodies of 4 KiB and more)
 *     -> {"sent": [{key, tag, msgId, queueId, queueOffset, sendStatus}, ...]}
 *   {"phase": "consume", "namesrv": ..., "topic": T, "group": G, "subExpression": "*" | "TagA || TagB",
 *    "expect": {key: timesDelivered, ...}, "failOnce": [key, ...], "settleMs": n, "timeoutMs": n}
 *     -> {"deliveries": [...], "pulled": {tag: count}, "timedOut": bool, "errors": [...]}
 * Every result also carries "wire": {requestCode: {responseCode: count}} for what the client asked
 * (oneway requests count under response "oneway") and "fromBroker": {requestCode: count} for what
 * the broker sent the client unasked, captured at the client's channel.
 *
 * A consume phase runs one push consumer (cluster model) until every expected key was delivered
 * the expected number of times, waits settleMs more to catch anything unexpected (old messages,
 * duplicates), then closes the consumer, which commits its offsets to the broker.  A listener
 * throws the first time it sees a key listed in failOnce, so the client sends that message back
 * (CONSUMER_SEND_MSG_BACK) and it comes again through %RETRY%<group>.  "pulled" counts, per tag,
 * what the broker returned to the client's pulls, before the client's own tag check: it shows
 * whether the broker filtered.
 */

const crypto = require('crypto');
const { Producer, Consumer, Message } = require('ali-ons');
const Channel = require('ali-ons/lib/channel');
const ProcessQueue = require('ali-ons/lib/process_queue');

const verbose = !!process.env.ROCKETQ_COMPAT_VERBOSE;
const logger = {
  info: (...a) => { if (verbose) console.error('[info]', ...a); },
  debug: () => {},
  warn: (...a) => console.error('[warn]', ...a),
  error: (...a) => console.error('[error]', ...a),
};
// ali-ons insists on an HTTP client for looking up NameServers; with nameSrv set it never calls it.
const httpclient = { request: async () => { throw new Error('no HTTP NameServer lookup in this test'); } };

const wire = {};
const fromBroker = {};
function captureWire() {
  const count = (table, a, b) => {
    table[a] = table[a] || {};
    table[a][b] = (table[a][b] || 0) + 1;
  };
  const { invoke, invokeOneway, emit } = Channel.prototype;
  Channel.prototype.invoke = async function(command, timeout) {
    try {
      const response = await invoke.call(this, command, timeout);
      count(wire, command.code, response.code);
      return response;
    } catch (err) {
      count(wire, command.code, err.name || 'error');
      throw err;
    }
  };
  Channel.prototype.invokeOneway = function(command) {
    count(wire, command.code, 'oneway');
    return invokeOneway.call(this, command);
  };
  Channel.prototype.emit = function(type, entity, ...rest) {
    if (type === 'request' && entity && entity.data) {
      fromBroker[entity.data.code] = (fromBroker[entity.data.code] || 0) + 1;
    }
    return emit.call(this, type, entity, ...rest);
  };
}

function common(cfg) {
  const credentials = cfg.accessKey ? { accessKey: cfg.accessKey, secretKey: cfg.secretKey } : {};
  return { nameSrv: cfg.namesrv, httpclient, logger, ...credentials };   // every other option at its default
}

async function produce(cfg) {
  const producer = new Producer({ ...common(cfg), producerGroup: cfg.producerGroup || 'PID_COMPAT' });
  const errors = [];
  producer.on('error', err => errors.push(String(err && err.message)));
  await producer.ready();
  const sent = [];
  for (const m of cfg.messages) {
    const body = m.repeat ? m.body.repeat(m.repeat) : m.body;
    const msg = new Message(cfg.topic, m.tag, body);
    msg.keys = [ m.key ];
    if (m.shardingKey) msg.shardingKey = m.shardingKey;
    if (m.delayLevel) msg.delayTimeLevel = m.delayLevel;
    const r = await producer.send(msg);
    sent.push({ key: m.key, tag: m.tag, msgId: r.msgId, queueId: Number(r.messageQueue.queueId),
      queueOffset: r.queueOffset, sendStatus: r.sendStatus });
  }
  await producer.close();
  return { sent, errors };
}

function countPulledTags(pulled) {
  const original = ProcessQueue.prototype.putMessage;
  ProcessQueue.prototype.putMessage = function(msgs) {
    for (const m of msgs) {
      const tag = m.tags || '';
      pulled[tag] = (pulled[tag] || 0) + 1;
    }
    return original.call(this, msgs);
  };
}

async function consume(cfg) {
  const pulled = {};
  countPulledTags(pulled);
  const consumer = new Consumer({ ...common(cfg), consumerGroup: cfg.group });
  const errors = [];
  consumer.on('error', err => errors.push(String(err && err.message)));
  const deliveries = [];
  const failOnce = new Set(cfg.failOnce || []);
  const seen = {};
  let done;
  const finished = new Promise(resolve => { done = resolve; });
  const check = () => {
    if (Object.entries(cfg.expect).every(([ k, n ]) => (seen[k] || 0) >= n)) done(false);
  };
  consumer.subscribe(cfg.topic, cfg.subExpression || '*', async msg => {
    const key = msg.keys;
    const body = msg.body || Buffer.alloc(0);
    deliveries.push({ key, tag: msg.tags, bodyLen: body.length,
      bodyMd5: crypto.createHash('md5').update(body).digest('hex'), topic: msg.topic, queueId: msg.queueId,
      queueOffset: msg.queueOffset, reconsumeTimes: msg.reconsumeTimes, msgId: msg.msgId,
      originMsgId: msg.originMessageId || null, retryTopic: msg.retryTopic || null,
      realTopic: msg.properties.REAL_TOPIC || null });
    seen[key] = (seen[key] || 0) + 1;
    if (failOnce.has(key)) {
      failOnce.delete(key);
      check();
      throw new Error(`failing ${key} once on purpose`);
    }
    check();
  });
  check();
  const timer = setTimeout(() => done(true), cfg.timeoutMs);
  const timedOut = await finished;
  clearTimeout(timer);
  if (!timedOut) await new Promise(resolve => setTimeout(resolve, cfg.settleMs || 0));
  await consumer.close();
  return { deliveries, pulled, timedOut, errors };
}

async function main() {
  const cfg = JSON.parse(process.argv[2]);
  const phases = { produce, consume };
  if (!phases[cfg.phase]) throw new Error(`unknown phase ${cfg.phase}`);
  captureWire();
  const result = await phases[cfg.phase](cfg);
  process.stdout.write(JSON.stringify({ ...result, wire, fromBroker }) + '\n');
}

main().then(() => process.exit(0), err => {
  console.error(err && err.stack || err);
  process.stdout.write(JSON.stringify({ fatal: String(err && err.message) }) + '\n');
  process.exit(1);
});
