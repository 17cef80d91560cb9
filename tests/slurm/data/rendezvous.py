# MASTER_ADDR:MASTER_PORT rendezvous over Slurm tasks: rank 0 listens on MASTER_ADDR, every
# other rank connects and says who it is; rank 0 prints what it got. Run with srun -N2 -n2.
import os, socket, time
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if rank == 0:
    server = socket.create_server((addr, port))
    for _ in range(world - 1):
        conn, _ = server.accept()
        print("rank 0 got:", conn.recv(100).decode())
        conn.close()
else:
    for _ in range(300):  # until rank 0 listens: a hang guard, not a measurement
        try:
            conn = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.1)
    conn.sendall(f"rank {rank} on {os.environ['SLURMD_NODENAME']}".encode())
