! fheat: the heat solver of heatdis.c written in Fortran against FTI's
! Fortran interface (use fti), for the Fortran tests.
!
!   fheat CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS [crash]
!
! The same grid, the same arithmetic in the same order and the same
! protected variables as heatdis.c (0: the iteration, an integer; 1: the
! grid of ROWS+2 rows of NX doubles), so either restarts from the other's
! checkpoints and both end bit-identical. It calls plain MPI_Init, as
! FTI's codes do, and prints heatdis.c's EVENT lines. HEATDIS_PAUSE_MS
! pauses before each checkpoint, as in heatdis.c (the benchmark).
program fheat
  use, intrinsic :: iso_c_binding, only: c_int
  use, intrinsic :: iso_fortran_env, only: output_unit, error_unit
  use mpi
  use fti
  implicit none
  interface
    function usleep(us) bind(c, name='usleep')
      import :: c_int
      integer(c_int) :: usleep
      integer(c_int), value :: us
    end function usleep
  end interface
  character(len=4096) :: config, outdir, arg, levels
  integer :: nx, rows, iters, every, nlevels, err, rank, nprocs, comm, status, rc
  integer :: up, down, r, x, grow, id, level, u, restart_iter, provided
  integer, target :: iter
  integer, pointer :: piter
  real(8), pointer :: h(:, :)
  real(8), allocatable :: g(:, :)
  logical :: crash
  character(len=16) :: thread
  integer :: pause_ms, n
  double precision :: t0, t

  if (command_argument_count() /= 7 .and. command_argument_count() /= 8) then
    write (error_unit, *) 'usage: fheat CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS [crash]'
    stop 2
  end if
  call get_command_argument(1, config)
  call get_command_argument(2, outdir)
  call get_command_argument(3, arg); read (arg, *) nx
  call get_command_argument(4, arg); read (arg, *) rows
  call get_command_argument(5, arg); read (arg, *) iters
  call get_command_argument(6, arg); read (arg, *) every
  call get_command_argument(7, levels)
  nlevels = len_trim(levels)
  crash = command_argument_count() == 8
  pause_ms = 0
  call get_environment_variable('HEATDIS_PAUSE_MS', arg, n, status)
  if (status == 0 .and. n > 0) read (arg, *) pause_ms

  call MPI_Init(err)
  call MPI_Query_thread(provided, err)
  thread = 'single'
  if (provided == MPI_THREAD_FUNNELED) thread = 'funneled'
  if (provided == MPI_THREAD_SERIALIZED) thread = 'serialized'
  if (provided == MPI_THREAD_MULTIPLE) thread = 'multiple'
  comm = MPI_COMM_WORLD
  call FTI_Init(config, comm, err) ! comm becomes FTI_COMM_WORLD
  if (err /= FTI_SCES) then
    write (error_unit, *) 'FTI_Init returned ', err
    call MPI_Abort(MPI_COMM_WORLD, 21, rc)
  end if
  call MPI_Comm_rank(comm, rank, err)
  call MPI_Comm_size(comm, nprocs, err)
  call event('pid pid=', getpid())
  write (arg, '(a)') 'thread provided=' // trim(thread)
  call line(arg)

  allocate (h(0:nx - 1, 0:rows + 1), g(0:nx - 1, 0:rows + 1))
  h = 0
  g = 0
  if (rank == 0) h(:, 1) = 100.0d0
  iter = 0
  piter => iter
  call FTI_Protect(0, piter, err)
  if (err /= FTI_SCES) call MPI_Abort(comm, 23, rc)
  call FTI_Protect(1, h, err)
  if (err /= FTI_SCES) call MPI_Abort(comm, 23, rc)
  call FTI_Status(status)
  restart_iter = -1
  if (status /= 0) then
    call FTI_Recover(err)
    if (err /= FTI_SCES) then
      write (error_unit, *) 'rank ', rank, ': FTI_Recover returned ', err
      call MPI_Abort(comm, 24, rc)
    end if
    restart_iter = iter
  end if
  write (arg, '(a,i0,a,i0)') 'start status=', status, ' iter=', iter
  call line(arg)

  up = rank - 1
  if (rank == 0) up = MPI_PROC_NULL
  down = rank + 1
  if (rank == nprocs - 1) down = MPI_PROC_NULL
  do while (iter < iters)
    if (every > 0 .and. iter > 0 .and. mod(iter, every) == 0 .and. iter /= restart_iter .and. levels(1:1) /= '0') then
      id = iter / every
      level = ichar(levels(mod(id - 1, nlevels) + 1:mod(id - 1, nlevels) + 1)) - ichar('0')
      write (arg, '(a,i0,a,i0,a,i0)') 'ckpt-begin id=', id, ' level=', level, ' iter=', iter
      call line(arg)
      if (pause_ms > 0) n = usleep(int(pause_ms * 1000, c_int))
      ! Time the checkpoint, not the wait for the slowest rank's last step.
      call MPI_Barrier(comm, rc)
      t0 = MPI_Wtime()
      call FTI_Checkpoint(id, level, err)
      t = MPI_Wtime() - t0
      write (arg, '(a,i0,a,i0,a,i0,a,f0.6)') 'ckpt-end id=', id, ' level=', level, ' rc=', err, ' sec=', t
      call line(arg)
      if (err /= 1) call MPI_Abort(comm, 25, rc) ! FTI_DONE
    end if
    call MPI_Sendrecv(h(0, 1), nx, MPI_DOUBLE_PRECISION, up, 1, h(0, rows + 1), nx, MPI_DOUBLE_PRECISION, down, 1, &
                      comm, MPI_STATUS_IGNORE, err)
    call MPI_Sendrecv(h(0, rows), nx, MPI_DOUBLE_PRECISION, down, 2, h(0, 0), nx, MPI_DOUBLE_PRECISION, up, 2, &
                      comm, MPI_STATUS_IGNORE, err)
    do r = 1, rows
      grow = rank * rows + r - 1
      do x = 0, nx - 1
        if (grow == 0) then
          g(x, r) = 100.0d0
        else if (grow == nprocs * rows - 1 .or. x == 0 .or. x == nx - 1) then
          g(x, r) = 0.0d0
        else
          g(x, r) = 0.25d0 * (h(x, r - 1) + h(x, r + 1) + h(x - 1, r) + h(x + 1, r))
        end if
      end do
    end do
    h(:, 1:rows) = g(:, 1:rows)
    iter = iter + 1
  end do

  write (arg, '(a,a,i4.4,a)') trim(outdir), '/final-', rank, '.bin'
  open (newunit=u, file=trim(arg), access='stream', form='unformatted', status='replace')
  write (u) h(:, 1:rows)
  close (u)
  write (arg, '(a,i0)') 'done iter=', iter
  call line(arg)
  if (.not. crash) then
    call FTI_Finalize(err)
    if (err /= FTI_SCES) call MPI_Abort(MPI_COMM_WORLD, 27, rc)
  end if
  call MPI_Finalize(err)

contains

  subroutine line(s)
    character(len=*), intent(in) :: s
    write (output_unit, '(a,i0,a,a)') 'EVENT rank=', rank, ' ', trim(s)
    flush (output_unit)
  end subroutine line

  subroutine event(s, v)
    character(len=*), intent(in) :: s
    integer, intent(in) :: v
    character(len=64) :: b
    write (b, '(a,i0)') s, v
    call line(b)
  end subroutine event

end program fheat
