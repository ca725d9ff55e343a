import json

with open('items.json') as f:
    items = json.load(f)
with open('report.txt', 'w') as out:
    out.write(f'items: {len(items)}')
