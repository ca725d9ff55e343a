CREATE TABLE sales (region TEXT NOT NULL, amount INTEGER NOT NULL);
INSERT INTO sales VALUES
  ('north', 120), ('south', 80), ('east', 200), ('north', 45),
  ('west', 10), ('south', 95), ('east', 5), ('west', 300);
