// A real small model (a GGUF file, run by llama.cpp through node-llama-cpp's prebuilt
// binaries) behind an OpenAI-shaped /v1/chat/completions, for Burrow's real-model tests.
//
// It answers tool turns as llama-cpp-python's `chatml-function-calling` handler does, the
// server the real-models issue measured: the model is shown the tools and, constrained by a
// grammar, first chooses between "message:" and "functions.<name>:"; a call's arguments are
// then generated under a grammar of that tool's JSON schema. Which branch it takes and what
// it writes are the model's own (greedy decoding: the same request gets the same answer).
//
//   node server.mjs --model FILE --port N [--name ID] [--api-key KEY] [--threads 1]
//                   [--context 8192] [--n-predict 512] [--refuse-streamed-tools] [--log FILE]
//
// --n-predict caps the tokens of one answer, as llama.cpp server's flag of that name does: a
// call cut off there keeps its unfinished arguments, and the answer says "length".
// --refuse-streamed-tools answers a streamed request with tools as llama-cpp-python does
// (a 500: "Automatic streaming tool choice is not supported"). --log appends one JSON line
// per answered request: the messages it was sent, what it answered, tokens and timings.
import fs from "node:fs";
import http from "node:http";
import {parseArgs} from "node:util";
import {getLlama, LlamaCompletion, LlamaGrammar} from "node-llama-cpp";

const {values: opts} = parseArgs({
    options: {
        model: {type: "string"},
        port: {type: "string", default: "8090"},
        host: {type: "string", default: "127.0.0.1"},
        name: {type: "string", default: "smollm2-135m"},
        "api-key": {type: "string"},
        threads: {type: "string", default: "1"},
        context: {type: "string", default: "8192"},
        "n-predict": {type: "string", default: "512"},
        "refuse-streamed-tools": {type: "boolean", default: false},
        log: {type: "string"},
    },
});
if (!opts.model) {
    console.error("server.mjs: --model FILE is required");
    process.exit(2);
}

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: opts.model});
const contextSize = Number(opts.context);
const context = await model.createContext({contextSize, threads: Number(opts.threads)});
const completion = new LlamaCompletion({contextSequence: context.getSequence()});
const MAX_BODY = 8 * 1024 * 1024;

class HttpError extends Error {
    constructor(status, message, type = "invalid_request_error", code = null) {
        super(message);
        Object.assign(this, {status, type, code});
    }
}

// One sequence, so one answer at a time, as a llama.cpp server with one slot.
let queue = Promise.resolve();
const serialized = (work) => {
    const done = queue.then(work, work);
    queue = done.catch(() => {});
    return done;
};

function text(content) {
    if (content == null) return "";
    if (typeof content === "string") return content;
    return content.filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

function toolsSection(tools) {
    const lines = tools.map((t) => {
        const f = t.function;
        return `// ${f.description ?? ""}\ntype ${f.name} = (_: ${JSON.stringify(f.parameters ?? {})}) => any;`;
    });
    return (
        "\n\n# Tools\n\nnamespace functions {\n" + lines.join("\n\n") + "\n}\n\n" +
        "Begin each answer with `message:` and write to the user, or with " +
        "`functions.<name>:` and a JSON object of that function's arguments to call it."
    );
}

// ChatML, as SmolLM2's template, with the function-calling conventions above.
function render(messages, tools) {
    const useTools = tools.length > 0;
    let prompt = "";
    let system = messages.filter((m) => m.role === "system").map((m) => text(m.content)).join("\n\n");
    if (useTools) system += toolsSection(tools);
    if (system) prompt += `<|im_start|>system\n${system}<|im_end|>\n`;
    for (const m of messages) {
        if (m.role === "system") continue;
        if (m.role === "assistant") {
            const parts = [];
            const said = text(m.content);
            if (said) parts.push(useTools ? `message: ${said}` : said);
            for (const call of m.tool_calls ?? []) {
                parts.push(`functions.${call.function.name}:\n${call.function.arguments}`);
            }
            prompt += `<|im_start|>assistant\n${parts.join("\n")}<|im_end|>\n`;
        } else if (m.role === "tool") {
            prompt += `<|im_start|>function\n${text(m.content)}<|im_end|>\n`;
        } else {
            prompt += `<|im_start|>user\n${text(m.content)}<|im_end|>\n`;
        }
    }
    return prompt + "<|im_start|>assistant\n";
}

// node-llama-cpp's schema grammars take a subset of JSON schema; what it cannot take
// falls back to any JSON object (the arguments are then the model's alone to get right).
function schemaFor(schema) {
    const keep = (s) => {
        if (typeof s !== "object" || s === null) return {};
        const out = {};
        if (s.type) out.type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
        if (s.enum) out.enum = s.enum;
        if (s.properties) {
            out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, keep(v)]));
            // Every property is written: a grammar cannot leave optional ones to the model.
            out.required = Object.keys(s.properties).filter((k) => (s.required ?? []).includes(k));
        }
        if (s.items) out.items = keep(s.items);
        return out;
    };
    return keep(schema);
}

async function argumentsGrammar(tool) {
    try {
        return await llama.createGrammarForJsonSchema(schemaFor(tool.function.parameters ?? {}));
    } catch {
        return await llama.getGrammarFor("json");
    }
}

async function generate(tokens, options) {
    const room = contextSize - tokens.length;
    if (room <= 16) {
        throw new HttpError(400, `This model's maximum context length is ${contextSize} tokens; ` +
            `the request has ${tokens.length}.`, "invalid_request_error", "context_length_exceeded");
    }
    const result = await completion.generateCompletionWithMeta(tokens, {
        temperature: 0, seed: 1, ...options, maxTokens: Math.min(options.maxTokens, room - 1),
    });
    return result;
}

// The answer: {content, calls, finish, promptTokens, completionTokens}; `onText` gets the
// message's text as it is decoded.
async function answer(body, onText) {
    const tools = (body.tools ?? []).filter((t) => t.type === "function");
    const choice = body.tool_choice ?? "auto";
    const offered = choice === "none" ? [] : tools;
    const maxTokens = Math.min(body.max_completion_tokens ?? body.max_tokens ?? Infinity, Number(opts["n-predict"]));
    const prompt = render(body.messages ?? [], tools);
    const tokens = model.tokenize(prompt, true);
    const out = {content: "", calls: [], finish: "stop", promptTokens: tokens.length, completionTokens: 0};
    let head = "";
    if (offered.length) {
        const names = offered.map((t) => JSON.stringify(`functions.${t.function.name}:`)).join(" | ");
        const grammar = new LlamaGrammar(llama, {grammar: `root ::= "message:" | ${names}\n`});
        const chosen = await generate(tokens, {grammar, maxTokens: 24});
        head = chosen.response;
        out.completionTokens += model.tokenize(head).length;
        const name = head.startsWith("functions.") ? head.slice(10, -1) : null;
        const tool = offered.find((t) => t.function.name === name);
        if (tool) {
            const more = model.tokenize(`${prompt}${head}\n`, true);
            const args = await generate(more, {grammar: await argumentsGrammar(tool), maxTokens});
            out.completionTokens += model.tokenize(args.response).length;
            out.calls.push({id: `call_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
                type: "function", function: {name, arguments: args.response.trim()}});
            out.finish = args.metadata.stopReason === "maxTokens" ? "length" : "tool_calls";
            return out;
        }
    }
    const rest = model.tokenize(`${prompt}${head}`, true);
    let started = false;
    const said = await generate(rest, {
        maxTokens,
        customStopTriggers: ["<|im_end|>", "<|im_start|>"],
        onTextChunk(chunk) {
            if (!started) {  // the space after "message:"
                chunk = chunk.replace(/^\s+/, "");
                if (!chunk) return;
                started = true;
            }
            onText(chunk);
        },
    });
    out.content = said.response.replace(/^\s+/, "");
    out.completionTokens += model.tokenize(said.response).length;
    if (said.metadata.stopReason === "maxTokens") out.finish = "length";
    return out;
}

function readBody(req) {
    return new Promise((resolve, reject) => {
        let size = 0;
        const chunks = [];
        req.on("data", (c) => {
            size += c.length;
            if (size > MAX_BODY) reject(new HttpError(413, "The request body is too large."));
            else chunks.push(c);
        });
        req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        req.on("error", reject);
    });
}

function sendJson(res, status, value) {
    res.writeHead(status, {"content-type": "application/json"});
    res.end(JSON.stringify(value));
}

function sendError(res, exc) {
    const status = exc.status ?? 500;
    const error = {message: exc.message, type: exc.type ?? "server_error", code: exc.code ?? null};
    if (res.headersSent) {
        res.end(`data: ${JSON.stringify({error})}\n\n`);
    } else {
        sendJson(res, status, {error});
    }
}

// Wall-clock milliseconds with sub-millisecond precision, comparable with Python's time.time().
// CLOCK_MONOTONIC in ms, the clock Python's time.monotonic_ns() reads: a bench on this
// machine compares the two without the wall clocks' offset (timeOrigin is fixed at start).
const now = () => Number(process.hrtime.bigint()) / 1e6;

async function chat(req, res) {
    const receivedAt = now();  // the request's headers are in: the client has sent it
    let body;
    try {
        body = JSON.parse(await readBody(req));
    } catch (exc) {
        throw exc instanceof HttpError ? exc : new HttpError(400, `The body is not JSON: ${exc.message}`);
    }
    if (!Array.isArray(body.messages)) throw new HttpError(400, "'messages' is a required property");
    if (body.model !== opts.name) {
        throw new HttpError(404, `The model \`${body.model}\` does not exist.`, "invalid_request_error", "model_not_found");
    }
    const tools = body.tools ?? [];
    if (body.stream && tools.length && opts["refuse-streamed-tools"]) {
        if (opts.log) fs.appendFileSync(opts.log, JSON.stringify({stream: true, refused: true}) + "\n");
        // llama-cpp-python 0.3's shape for this refusal (server/errors.py).
        throw new HttpError(500, "Automatic streaming tool choice is not supported", "internal_server_error");
    }
    const id = `chatcmpl-${Date.now().toString(36)}`;
    const created = Math.floor(Date.now() / 1000);
    const started = performance.now();
    const chunk = (choices, extra = {}) =>
        `data: ${JSON.stringify({id, object: "chat.completion.chunk", created, model: opts.name, choices, ...extra})}\n\n`;
    let out;
    if (body.stream) {
        out = await serialized(() => answer(body, (piece) => {
            if (!res.headersSent) {
                res.writeHead(200, {"content-type": "text/event-stream", "cache-control": "no-cache"});
                res.write(chunk([{index: 0, delta: {role: "assistant", content: ""}, finish_reason: null}]));
            }
            res.write(chunk([{index: 0, delta: {content: piece}, finish_reason: null}]));
        }));
        if (!res.headersSent) {
            res.writeHead(200, {"content-type": "text/event-stream", "cache-control": "no-cache"});
            res.write(chunk([{index: 0, delta: {role: "assistant", content: ""}, finish_reason: null}]));
        }
        out.calls.forEach((call, index) => {
            res.write(chunk([{index: 0, delta: {tool_calls: [{index, ...call}]}, finish_reason: null}]));
        });
        res.write(chunk([{index: 0, delta: {}, finish_reason: out.finish}]));
        if (body.stream_options?.include_usage) res.write(chunk([], {usage: usage(out)}));
        res.end("data: [DONE]\n\n");
    } else {
        out = await serialized(() => answer(body, () => {}));
        const message = {role: "assistant", content: out.calls.length ? null : out.content};
        if (out.calls.length) message.tool_calls = out.calls;
        sendJson(res, 200, {id, object: "chat.completion", created, model: opts.name,
            choices: [{index: 0, message, finish_reason: out.finish}], usage: usage(out)});
    }
    const answeredAt = now();  // the last token and the answer's end are written out
    const seconds = (performance.now() - started) / 1000;
    if (opts.log) {
        fs.appendFileSync(opts.log, JSON.stringify({
            messages: body.messages, tools: tools.map((t) => t.function?.name), stream: !!body.stream,
            content: out.content, calls: out.calls, finish: out.finish,
            prompt_tokens: out.promptTokens, completion_tokens: out.completionTokens, seconds,
            received_at: receivedAt, answered_at: answeredAt,
        }) + "\n");
    }
}

const usage = (out) => ({prompt_tokens: out.promptTokens, completion_tokens: out.completionTokens,
    total_tokens: out.promptTokens + out.completionTokens});

const server = http.createServer(async (req, res) => {
    try {
        const path = new URL(req.url, "http://x").pathname;
        if (req.method === "GET" && path === "/health") return sendJson(res, 200, {status: "ok"});
        if (opts["api-key"] && req.headers.authorization !== `Bearer ${opts["api-key"]}`) {
            throw new HttpError(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key");
        }
        if (req.method === "GET" && path === "/v1/models") {
            return sendJson(res, 200, {object: "list", data: [{id: opts.name, object: "model", owned_by: "local"}]});
        }
        if (req.method === "GET" && path === "/props") {  // llama.cpp server's
            return sendJson(res, 200, {default_generation_settings: {n_ctx: contextSize}, model_path: opts.model});
        }
        if (req.method === "POST" && path === "/v1/chat/completions") return await chat(req, res);
        throw new HttpError(404, `No route ${req.method} ${path}.`);
    } catch (exc) {
        if (!(exc instanceof HttpError)) console.error(exc);
        sendError(res, exc);
    }
});
server.listen(Number(opts.port), opts.host, () => {
    console.log(`listening on http://${opts.host}:${opts.port}/v1 (model ${opts.name})`);
});
