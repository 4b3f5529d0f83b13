"""The store on PostgreSQL (asyncpg): the same operations and rows as the SQLite store."""
